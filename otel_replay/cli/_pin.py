"""``otel-replay pin RUN``: keep a run forever (or, with ``--unpin``, not)."""

from __future__ import annotations

import click

from otel_replay.cli._common import open_store, resolve_run, store_option
from otel_replay.cli._format import local_time, printable

__all__ = ["pin"]


@click.command()
@click.argument("run")
@store_option
@click.option("--unpin", is_flag=True, help="Put the run back under the retention policy.")
def pin(run: str, store: str | None, unpin: bool) -> None:
    """Keep RUN forever: gc never removes a pinned run.

    RUN is a run id, a unique prefix of one, or `latest` (the newest recording).
    """
    with open_store(store) as opened:
        info = resolve_run(opened, run)
        opened.pin(info.run_id, pinned=not unpin)
        if not unpin:
            click.echo(f"Pinned {printable(info.run_id)}: gc keeps it until it is unpinned.")
            return
        expires = opened.retention.expires_ns(opened.run(info.run_id))
    when = local_time(expires) if expires is not None else "never"
    click.echo(f"Unpinned {printable(info.run_id)}: it expires {when} under the retention policy.")
