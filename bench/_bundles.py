"""Golden bundles for the benchmarks of golden tests (imported, not run).

Runs of ``_corpus_agent`` are really recorded against the stand-in, in this process, through
the real instrumentor and ``replay`` exporter into a store, then written as ``otel-replay
export`` writes bundles; :func:`copies` makes a corpus of them with fresh run ids. Everything
is kept under the folder it is given, and reused when there.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import httpx
import vcr
from _corpus_agent import converse, turns
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

import otel_replay
from examples.standin import StandIn
from otel_replay.capture.instrumentor import ReplayInstrumentor
from otel_replay.export import ReplaySpanExporter
from otel_replay.redact import Redactor
from otel_replay.replay.sources import load_run, write_bundle
from otel_replay.runs import start_process_run

MATCH_ON = ["method", "uri", "body"]
"""What a cassette's requests are told apart by: as otel-replay, by their bodies."""


def record(folder: Path, lengths: dict[str, int | None], cassette: Path | None = None) -> None:
    """Record a run per name in ``lengths`` into bundles ``folder/NAME``: an int N is the
    agent as a program runs it (N questions, N read as a recorded value: N + 1 steps), None
    ten questions with nothing but the ten HTTP steps, also written to ``cassette`` by vcrpy
    (the same exchanges, seen by both at once). Names already there are not recorded again."""
    todo = {name: n for name, n in lengths.items() if not (folder / name).exists()}
    if not todo:
        return
    store = folder / ".store"
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(ReplaySpanExporter(store)))
    instrumentor = ReplayInstrumentor()
    start_process_run()
    instrumentor.instrument(tracer_provider=provider)
    try:
        with StandIn(event_delay=0.001) as standin:
            for name, asked in todo.items():
                with (
                    otel_replay.run(name="bench", run_id=f"r_bench_{name}"),
                    httpx.Client(base_url=standin.base_url) as client,
                ):
                    if asked is not None:
                        converse(client, turns(asked))
                        continue
                    if cassette is None:
                        raise ValueError(f"{name}: a run of plain steps needs a cassette")
                    recorder = vcr.VCR(record_mode="all", match_on=MATCH_ON)
                    with recorder.use_cassette(str(cassette)):
                        converse(client, 10)
    finally:
        instrumentor.uninstrument()
        provider.shutdown()
    for name in todo:
        write_bundle(load_run(f"r_bench_{name}", store=str(store)), folder / name, Redactor())


def copies(bundles: list[Path], count: int, folder: Path) -> list[Path]:
    """``count`` bundles under ``folder`` (made when missing), the given ones in turn, each
    with a run id of its own (``r_copy_00042``)."""
    out = []
    for number in range(count):
        source = bundles[number % len(bundles)]
        target = folder / f"{number:05d}-{source.name}"
        out.append(target)
        if target.exists():
            continue
        shutil.copytree(source / "steps", target / "steps")
        manifest = (source / "bundle.json").read_text(encoding="utf-8")
        old = load_run(str(source)).run_id
        renamed = manifest.replace(f'"{old}"', f'"r_copy_{number:05d}"')
        (target / "bundle.json").write_text(renamed, encoding="utf-8")
    return out
