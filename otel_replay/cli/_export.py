"""``otel-replay export RUN DIR``: one run as a golden bundle to check in and replay."""

from __future__ import annotations

from pathlib import Path

import click

from otel_replay import settings
from otel_replay.cli._common import CliError, store_option, stored_ref
from otel_replay.cli._format import plural, printable
from otel_replay.redact import Redactor
from otel_replay.replay.sources import is_remote, load_run, write_bundle

__all__ = ["export"]


@click.command("export")
@click.argument("run")
@click.argument("directory", metavar="DIR", type=click.Path(path_type=Path))
@store_option
def export(run: str, directory: Path, store: str | None) -> None:
    """Write RUN to DIR as a bundle: a directory to check in and review, which `replay`
    (and `@pytest.mark.otel_replay`) take as a source.

    RUN is a run id in the store (a unique prefix, or `latest`: the newest recording), an
    OTLP file or the Collector's archive directory, a URL answering OTLP JSON, or phoenix://,
    jaeger://, tempo://. DIR must not exist yet, or be empty: nothing is
    overwritten.

    DIR/bundle.json holds the run's kit and each step's facts; DIR/steps/ each step's exact
    request and response bodies, one file each. Everything is passed through the redaction
    rules again (OTEL_REPLAY_REDACT as it is now, credential headers and JSON credential
    values), so a pattern added since the recording takes effect.
    """
    config = settings.load()
    where = store if store is not None else config.store
    recorded = load_run(run if is_remote(run) else stored_ref(run, where), store=where)
    try:
        files = write_bundle(recorded, directory, Redactor(config.redact))
    except OSError as exc:
        raise CliError(f"cannot write {printable(str(directory))}: {exc.strerror or exc}") from None
    click.echo(
        f"exported run {printable(recorded.run_id)} ({plural(len(recorded.steps), 'step')}, "
        f"{plural(files, 'body file')}) to {printable(str(directory))}"
    )
