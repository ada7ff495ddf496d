"""``--otel-replay-record``: a marked test run live and recorded, its bundle written from
that recording.

The test function is the program: while it runs, httpx/httpx2 and the envelope (tools,
values, checkpoints) are instrumented into a tracer provider and a ``replay`` exporter of
the test's own, writing into a store of the test's own under pytest's temporary directory,
as a fresh process run. Nothing is shared with another test or another xdist worker; the
bundle is written from that store's run as ``otel-replay export`` writes one."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from otel_replay import settings
from otel_replay.capture.instrumentor import ReplayInstrumentor
from otel_replay.errors import OtelReplayError
from otel_replay.export import ReplaySpanExporter
from otel_replay.redact import Redactor
from otel_replay.replay import ReplayResult, Run, ServedStep
from otel_replay.replay.sources import is_bundle, load_run, write_bundle
from otel_replay.runs import start_process_run

__all__ = ["LiveRecording", "LiveResult", "Saved", "bundle_path", "save"]


def bundle_path(source: object) -> Path | None:
    """The bundle directory a marker's (rooted) source names, when one can be recorded there:
    a path that is a bundle, an empty directory or nothing yet. None for a run id, a URL, a
    file or a directory holding something else."""
    if isinstance(source, os.PathLike):
        source = os.fspath(source)
    if not isinstance(source, str) or "://" in source:
        return None
    path = Path(source)
    if not path.exists():
        # A name with no directory part is a run id (or a prefix of one), never a bundle.
        return path if os.sep in source or "/" in source else None
    if is_bundle(path) or (path.is_dir() and not any(path.iterdir())):
        return path
    return None


class LiveRecording:
    """The calling test recorded into ``store`` (a directory of its own) while the
    recording is open; :attr:`result` reads what it recorded so far as a replay result."""

    def __init__(self, store: Path) -> None:
        self.store = store
        self._provider = TracerProvider()
        self._provider.add_span_processor(BatchSpanProcessor(ReplaySpanExporter(str(store))))
        self._instrumentor = ReplayInstrumentor()
        self.run_id = ""

    def __enter__(self) -> LiveRecording:
        self.run_id = start_process_run().run_id
        self._instrumentor.instrument(tracer_provider=self._provider)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._instrumentor.is_instrumented_by_opentelemetry:
            self._instrumentor.uninstrument()
        self._provider.shutdown()  # every step written

    def run(self) -> Run:
        """The run recorded so far (an empty one before its first step): the test's process
        run, or the run the test's code opened itself (``otel_replay.run()``, as an agent
        does), whose steps are not the process run's. OtelReplayError when the test made
        steps in several runs: a bundle holds one."""
        self._provider.force_flush()
        run_id = self._made()
        try:
            return load_run(run_id, store=str(self.store))
        except OtelReplayError:
            return Run(run_id, f"store {self.store}", ())

    def _made(self) -> str:
        """The id of the one run of the test's store that has steps (the process run's id
        when none has)."""
        from otel_replay.store import Store  # noqa: PLC0415

        try:
            with Store.open(self.store, create=False) as store:
                made = [info.run_id for info in store.runs() if info.step_count]
        except OtelReplayError:  # nothing written yet
            return self.run_id
        if len(made) > 1:
            raise OtelReplayError(
                f"the test made steps in {len(made)} runs ({', '.join(made)}), each an "
                "otel_replay.run() block: a bundle holds one run (record each from a test "
                "of its own)"
            )
        return made[0] if made else self.run_id

    @property
    def result(self) -> ReplayResult:
        """The live run so far as a replay of itself: every step it made, in order, served
        as recorded (``identical``), ``live``, with its bodies."""
        run = self.run()
        steps = [
            ServedStep(
                order=order,
                method=recorded.step.method,
                url=recorded.step.url,
                endpoint=recorded.endpoint,
                request_hash=recorded.step.request_hash,
                how="hash",
                recorded=recorded.step.index,
                repeat=False,
                fidelity=recorded.fidelity,
                changes=(),
                live=True,
                request_body=recorded.request_body,
                response_body=recorded.step.response_body,
            )
            for order, recorded in enumerate(run.steps)
        ]
        return ReplayResult(run, steps, ())


class LiveResult:
    """What ``replay_result`` is while its test records: reads as the
    :class:`~otel_replay.replay.ReplayResult` of the live run so far, read afresh at each
    attribute."""

    def __init__(self, recording: LiveRecording) -> None:
        self._recording = recording

    def __getattr__(self, name: str) -> Any:
        return getattr(self._recording.result, name)

    def __repr__(self) -> str:
        return f"<live recording {self._recording.run_id}>"


@dataclass(frozen=True, slots=True)
class Saved:
    """A bundle written from a live run: where, how many steps, whether one was there
    before and, if so, whether it is unchanged, and what ``otel-replay diff`` says
    between the old bundle and the new."""

    bundle: Path
    steps: int
    replaced: bool
    identical: bool
    diff: str


def save(recording: LiveRecording, bundle: Path, scratch: Path) -> Saved:
    """Write the run ``recording`` made as the bundle at ``bundle``, in place of the one
    there (exchanged whole: see ``write_bundle``); ``scratch`` is an empty directory of the
    test's own where the new bundle is first written to be compared with the old."""
    from otel_replay.cli import diff_text  # noqa: PLC0415 - only when re-recording

    run = recording.run()
    redactor = Redactor(settings.load().redact)
    replaced = is_bundle(bundle)
    identical, diff = True, ""
    if replaced:
        fresh = scratch / "new"
        write_bundle(run, fresh, redactor)
        identical, diff = diff_text(str(bundle), str(fresh))
    write_bundle(run, bundle, redactor, replace=True)
    return Saved(bundle, len(run.steps), replaced, identical, diff)
