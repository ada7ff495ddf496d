"""Capture cost against the real peers: µs added per call to a real openai SDK call.

The call: ``client.chat.completions.create`` of the openai SDK (which sends through httpx2)
with an ~8 KB request and a ~4 KB canned JSON chat completion answered by an in-memory
``httpx2.MockTransport``, so the network does not drown the difference. Each variant runs in
a process of its own (instrumentations patch the SDK and must not meet); in that process the
bare SDK call is measured first, then the variant is instrumented and measured again: the
difference is what the variant adds. Runs repeat the round of processes, so the spread
between them shows.

Variants, each with an SDK ``TracerProvider`` and the default ``BatchSpanProcessor``:

* ``otel-replay`` — the instrumentor, exporting through the ``replay`` exporter into a
  temporary store, as in production (fixtures hashed and handed off, written on the
  exporter's thread).
* ``openai-v2`` — opentelemetry-instrumentation-openai-v2 (official, latest experimental
  GenAI conventions, content on spans).
* ``genai-openai`` — opentelemetry-instrumentation-genai-openai (official, content on spans).
* ``openinference`` — openinference-instrumentation-openai (content on by default).
* ``openllmetry`` — traceloop's opentelemetry-instrumentation-openai (content on by default).
* ``floor`` — no instrumentation's code at all: one CLIENT span per call made around
  ``Completions.create`` with the attributes the GenAI conventions require of a chat span
  (operation, provider, request and response model, response id, finish reasons, token
  usage, server address and port), read from the SDK's arguments and result. Every peer pays
  at least this; no span-per-call capture goes lower.

The peers export into a discarding exporter (what a user with a backend has on the
application's side). Content capture is on wherever the peer supports it, because otel-replay
captures content too.

Two clocks per call: wall time, and the CPU time of the application's thread
(``time.thread_time``). The exporters' threads run beside it, and the machine may be shared:
wall time includes whatever they (and others) take from the application, thread CPU time only
what the instrumentation costs the application's own thread. Process CPU (all threads) is
printed too, so work moved off the application thread is not hidden.

On a shared two-core machine the clocks spread by more than the differences they compare.
``--instructions`` adds a deterministic figure: each variant's worker runs again under
``valgrind --tool=callgrind`` (instrumentation off through the imports and the warm-up, then
on), bare and instrumented blocks alternating with a marker call between them on which
callgrind dumps its counters; the figure is the main thread's instructions per instrumented
call minus per bare call. It does not move with the load, so a change of a few percent shows.
What it does not see is what an instruction costs: valgrind emulates no SHA-NI, so hashing
counts for far more than on hardware that has it (its share, libcrypto's own instructions, is
printed apart); nor cache misses, system calls' time, or the application thread's waits for
the GIL while the exporter's thread holds it. ``--runs 0 --instructions`` counts only; the
verdict (and exit status) then goes by instructions.

The peers do not install beside the project's dev tools: each registers an
``opentelemetry_instrumentor`` entry point that ``opentelemetry-instrument`` would load in the
test suite, and genai-openai needs an opentelemetry-util-genai that openai-v2 cannot import.
Each lives in a throwaway venv that only this bench uses; ``--make-venvs`` builds them (with
the openai, httpx2 and OpenTelemetry versions of the running interpreter), by default under
``/tmp/otel-replay-peers/NAME``; ``--python NAME=PATH`` points a peer at another interpreter.
By hand::

    python -m venv /tmp/otel-replay-peers/openinference
    /tmp/otel-replay-peers/openinference/bin/pip install openai==X httpx2==Y \\
        opentelemetry-sdk==Z openinference-instrumentation-openai

    python bench/capture_peers.py [--make-venvs] [--runs 3] [--calls 400] [--blocks 5]
    python bench/capture_peers.py --runs 0 --instructions   # a few minutes
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

TARGET_RATIO = 1.0
PEERS_DIR = Path("/tmp/otel-replay-peers")
BASE_URL = "http://llm.bench/v1"
MODEL = "gpt-4o-mini"

# name: (distribution to install, environment that turns content capture on)
VARIANTS: dict[str, tuple[str | None, dict[str, str]]] = {
    "otel-replay": (None, {}),
    "openai-v2": (
        "opentelemetry-instrumentation-openai-v2",
        {
            "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "span_only",
        },
    ),
    "genai-openai": (
        "opentelemetry-instrumentation-genai-openai",
        {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "span_only"},
    ),
    "openinference": ("openinference-instrumentation-openai", {}),
    "openllmetry": ("opentelemetry-instrumentation-openai", {"TRACELOOP_TRACE_CONTENT": "true"}),
    "floor": (None, {}),
}
PEERS = ("openai-v2", "genai-openai", "openinference", "openllmetry")
"""The GenAI instrumentations compared with (the target is against the cheapest)."""
OWN_VENV = ("genai-openai", "openinference", "openllmetry")
"""Peers that need a venv of their own (see the module docstring)."""


# --- the worker: one variant in this process -------------------------------------------------


def _messages(variant: int) -> list[dict[str, str]]:
    """An ~8 KB conversation (a system prompt and a dozen turns) whose last message differs
    by ``variant``."""
    turn = "Please check the status of my order and tell me when it will arrive. " * 7
    system = "You are a helpful support agent for ACME. Always look the order up first. " * 20
    messages = [{"role": "system", "content": system}]
    while len(json.dumps(messages)) < 7700:
        messages.append({"role": "user", "content": turn})
        messages.append({"role": "assistant", "content": turn[::-1]})
    messages.append({"role": "user", "content": f"And where is order A-{variant:04d}?"})
    return messages


def _response_body() -> bytes:
    answer = "Your order A-1234 shipped yesterday and should arrive on Friday. " * 60
    return json.dumps(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": 1763700000,
            "model": "gpt-4o-mini-2024-07-18",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": answer[:3700], "refusal": None},
                    "logprobs": None,
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 2100, "completion_tokens": 900, "total_tokens": 3000},
            "system_fingerprint": "fp_bench",
        }
    ).encode()


def _client(sizes: dict[str, int]) -> Any:
    import httpx2
    import openai

    body = _response_body()
    sizes["response"] = len(body)

    def handler(request: Any) -> Any:
        sizes["request"] = len(request.content)
        return httpx2.Response(200, content=body, headers={"content-type": "application/json"})

    http = openai.DefaultHttpxClient(transport=httpx2.MockTransport(handler))
    return openai.OpenAI(api_key="sk-bench", base_url=BASE_URL, http_client=http, max_retries=0)


def _block(client: Any, conversations: list[list[dict[str, str]]], calls: int) -> dict[str, float]:
    """One block of ``calls`` calls: µs per call, by wall clock, thread CPU and process CPU."""
    create = client.chat.completions.create
    count = len(conversations)
    wall, cpu, proc = time.perf_counter_ns(), time.thread_time_ns(), time.process_time_ns()
    for n in range(calls):
        create(model=MODEL, messages=conversations[n % count], temperature=0.7)
    return {
        "wall": (time.perf_counter_ns() - wall) / calls / 1000,
        "cpu": (time.thread_time_ns() - cpu) / calls / 1000,
        "proc": (time.process_time_ns() - proc) / calls / 1000,
    }


def _warm(client: Any, conversations: list[list[dict[str, str]]]) -> None:
    """A few calls first: imports, caches, the adaptive interpreter."""
    for n in range(20):
        client.chat.completions.create(model=MODEL, messages=conversations[n])


class _Discard:
    """A span exporter that drops what it gets; it counts the spans and keeps the attribute
    names of the first ones, to check that the variant is on only when it should be and
    that it captures content."""

    def __init__(self) -> None:
        self.spans = 0
        self.keys: set[str] = set()

    def export(self, spans: Any) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        self.spans += len(spans)
        if not self.keys:
            for span in spans:
                self.keys.update(span.attributes or {})
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


_CONTENT_KEYS = ("gen_ai.input.messages", "gen_ai.prompt.", "llm.input_messages", "input.value")


def _instrumentor(name: str, provider: Any, scratch: str) -> tuple[Any, _Discard | None]:
    """Set ``provider`` up as a user of variant ``name`` would; the variant's instrumentor
    and the discarding exporter, if any."""
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    if name == "otel-replay":
        from otel_replay.capture.instrumentor import ReplayInstrumentor
        from otel_replay.export import ReplaySpanExporter

        provider.add_span_processor(BatchSpanProcessor(ReplaySpanExporter(scratch)))
        return ReplayInstrumentor(), None
    discard = _Discard()
    provider.add_span_processor(BatchSpanProcessor(discard))  # type: ignore[arg-type]
    if name == "floor":
        return _FloorInstrumentor(), discard
    if name == "openai-v2":
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    elif name == "genai-openai":
        from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor
    elif name == "openinference":
        from openinference.instrumentation.openai import OpenAIInstrumentor
    elif name == "openllmetry":
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor
    else:
        raise SystemExit(f"unknown variant {name!r}")
    return OpenAIInstrumentor(), discard


class _FloorInstrumentor:
    """One span per call with the attributes a GenAI chat span requires, nothing else."""

    def instrument(self, tracer_provider: Any) -> None:
        import wrapt
        from opentelemetry import context, trace
        from opentelemetry.trace import SpanKind

        tracer = tracer_provider.get_tracer("bench-floor")

        def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            model = kwargs.get("model", "")
            attrs = {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": model,
                "server.address": "llm.bench",
                "server.port": 80,
            }
            span = tracer.start_span(f"chat {model}", kind=SpanKind.CLIENT, attributes=attrs)
            token = context.attach(trace.set_span_in_context(span))
            try:
                result = wrapped(*args, **kwargs)
            finally:
                context.detach(token)
            span.set_attributes(
                {
                    "gen_ai.response.model": result.model,
                    "gen_ai.response.id": result.id,
                    "gen_ai.response.finish_reasons": [c.finish_reason for c in result.choices],
                    "gen_ai.usage.input_tokens": result.usage.prompt_tokens,
                    "gen_ai.usage.output_tokens": result.usage.completion_tokens,
                }
            )
            span.end()
            return result

        wrapt.wrap_function_wrapper(
            "openai.resources.chat.completions", "Completions.create", wrapper
        )


_PATCHED_PACKAGES = ("openai", "httpx2", "httpx", "uuid")
"""Where instrumentations replace functions on the call's path (otel-replay holds
``uuid.uuid4``, which the SDK calls for every request: off in the bare blocks too)."""
_ABSENT = object()


def _attributes() -> dict[tuple[int, str], tuple[Any, Any]]:
    """Every attribute of the modules of :data:`_PATCHED_PACKAGES` and of the classes they
    define: (id of owner, name) -> (owner, value)."""
    found: dict[tuple[int, str], tuple[Any, Any]] = {}
    for module_name, module in list(sys.modules.items()):
        if module is None or module_name.split(".")[0] not in _PATCHED_PACKAGES:
            continue
        owners: list[Any] = [module]
        owners += [
            value
            for value in vars(module).values()
            if isinstance(value, type) and value.__module__ == module_name
        ]
        for owner in owners:
            for name, value in list(vars(owner).items()):
                found[(id(owner), name)] = (owner, value)
    return found


class _Toggle:
    """Turns an instrumentation on and off between blocks by swapping the functions its
    ``instrument()`` replaced in the SDK and the HTTP client (found by comparing their
    attributes before and after), because not every instrumentor's ``uninstrument`` undoes
    all of its ``instrument``."""

    def __init__(self, instrument: Any) -> None:
        before = _attributes()
        instrument()
        after = _attributes()
        # An attribute new on a class overrides an inherited one (a wrapped base method).
        self._swaps = [
            (owner, key[1], before.get(key, (owner, _ABSENT))[1], value)
            for key, (owner, value) in after.items()
            if before.get(key, (owner, _ABSENT))[1] is not value
            and (key in before or isinstance(owner, type))
            # functions replaced, not state the SDK builds lazily
            and callable(value)
            and not isinstance(value, type)
            and not key[1].startswith("__")
        ]
        if not self._swaps:
            raise SystemExit("the instrumentation patched nothing on the call's path")
        self._on = True

    def on(self) -> None:
        if not self._on:
            for owner, name, _, patched in self._swaps:
                setattr(owner, name, patched)
        self._on = True

    def off(self) -> None:
        if self._on:
            for owner, name, original, _ in self._swaps:
                if original is _ABSENT:
                    delattr(owner, name)
                else:
                    setattr(owner, name, original)
        self._on = False


class _Setup:
    """A variant ready to measure in this process: the client, the conversations, the
    provider and the switch that turns the variant on and off."""

    def __init__(self, name: str, scratch: str) -> None:
        from opentelemetry.sdk.trace import TracerProvider

        self.sizes: dict[str, int] = {}
        self.client = _client(self.sizes)
        self.conversations = [_messages(n) for n in range(64)]
        self.provider = TracerProvider()
        instrumentor, self.discard = _instrumentor(name, self.provider, scratch)
        _warm(self.client, self.conversations)  # the SDK imports its resources on first use
        self.toggle = _Toggle(lambda: instrumentor.instrument(tracer_provider=self.provider))

    def block(self, calls: int) -> dict[str, float]:
        return _block(self.client, self.conversations, calls)


def worker(name: str, calls: int, blocks: int) -> None:
    """Alternate blocks of bare and instrumented calls in this process (the variant turned on
    and off between them, see ``_Toggle``), and print JSON: per clock, the median over pairs of
    (instrumented - bare) and the medians of each."""
    with tempfile.TemporaryDirectory() as scratch:
        setup = _Setup(name, str(Path(scratch) / "store"))
        client, conversations, provider = setup.client, setup.conversations, setup.provider
        discard, toggle = setup.discard, setup.toggle
        bare: list[dict[str, float]] = []
        instrumented: list[dict[str, float]] = []
        for n in range(blocks + 1):  # the first pair warms up
            toggle.off()
            provider.force_flush()
            before = discard.spans if discard else 0
            _warm(client, conversations)
            sample = setup.block(calls)
            provider.force_flush()
            if discard and discard.spans != before:
                raise SystemExit(f"{name}: spans from a bare block")
            toggle.on()
            _warm(client, conversations)
            other = setup.block(calls)
            if n:
                bare.append(sample)
                instrumented.append(other)
        provider.shutdown()
        content = name == "otel-replay" or any(
            key.startswith(_CONTENT_KEYS) for key in (discard.keys if discard else ())
        )
        out: dict[str, Any] = {"sizes": setup.sizes, "content": content}
        for clock in ("wall", "cpu", "proc"):
            pairs = [i[clock] - b[clock] for b, i in zip(bare, instrumented, strict=True)]
            out[clock] = {
                "added": statistics.median(pairs),
                "bare": statistics.median(b[clock] for b in bare),
            }
        print(json.dumps(out))


# --- instructions: the same blocks under callgrind ------------------------------------------

MARKER = "getppid"
"""The C function whose entry makes callgrind dump (and reset) its counters: the worker calls
it between blocks, so each dump holds one block and nothing else."""
INSTRUCTION_CALLS = 10
"""Calls per block under callgrind, in two pairs of blocks: the counts do not move with the
load, only with what the calls do (the collector's passes fall in one block or another)."""


def _callgrind_on() -> None:
    """Turn callgrind's instrumentation on in this process (it starts off, so the imports run
    at near native speed). vgdb reaches a process only while it runs guest code: spin."""
    asked = subprocess.Popen(
        ["callgrind_control", "--instr=on", str(os.getpid())],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    while asked.poll() is None:
        pass
    if asked.returncode:
        raise SystemExit(f"callgrind_control failed: {asked.stderr.read().decode()[-500:]}")


def instructions_worker(name: str, calls: int) -> None:
    """Under ``valgrind --tool=callgrind --instr-atstart=no --dump-before=MARKER``: warm up
    uninstrumented, turn callgrind on, then alternate blocks of ``calls`` bare and instrumented
    calls with the marker around each block; print JSON naming each dump in order."""
    labels: list[str] = []

    def mark(label: str) -> None:
        os.getppid()  # the marker: callgrind dumps the counters since the previous one
        labels.append(label)

    with tempfile.TemporaryDirectory() as scratch:
        setup = _Setup(name, str(Path(scratch) / "store"))
        for switch in (setup.toggle.off, setup.toggle.on):  # both paths warm, uncounted
            switch()
            _warm(setup.client, setup.conversations)
        _callgrind_on()
        for _ in range(2):
            for label, switch in (("bare", setup.toggle.off), ("instrumented", setup.toggle.on)):
                switch()
                setup.provider.force_flush()
                setup.block(3)  # the interpreter re-specialises after the switch
                mark("-")
                setup.block(calls)
                mark(label)
        print(json.dumps({"labels": labels, "calls": calls}))
        os._exit(0)  # no shutdown under callgrind: it would only cost time


HASHING_LIBRARY = "libcrypto"
"""The shared object whose own instructions are the hashing (hashlib's sha256 is OpenSSL's)."""
_NAMED = re.compile(r"\((\d+)\)\s*(.*)")


@dataclass(frozen=True)
class _Dump:
    """One callgrind dump of the main thread: all its instructions, and those of
    :data:`HASHING_LIBRARY`'s own code."""

    total: int
    hashing: int


def _read_dump(path: Path) -> _Dump:
    """Sum a dump's cost lines, and those under an ``ob=`` naming the hashing library; the
    line after ``calls=`` is that call's inclusive cost, already counted in the callee's own
    lines. Checked against the dump's ``totals:``."""
    names: dict[str, str] = {}
    total = hashing = stated = 0
    hashing_here = after_call = False
    for line in path.read_text().splitlines():
        head = line[:1]
        if head.isdigit() or head in "+-*":
            if after_call:
                after_call = False
            elif len(fields := line.split()) > 1:
                total += int(fields[1])
                hashing += int(fields[1]) if hashing_here else 0
        elif line.startswith(("ob=", "cob=")):
            value = line.partition("=")[2]
            if named := _NAMED.match(value):  # "(3) /usr/lib/...so", then "(3)"
                value = names.setdefault(named[1], named[2])
            if line.startswith("ob="):
                hashing_here = HASHING_LIBRARY in Path(value).name
        elif line.startswith("calls="):
            after_call = True
        elif line.startswith("totals:"):
            stated = int(line.split()[1])
    if total != stated:
        raise RuntimeError(f"{path}: read {total} instructions, the dump states {stated}")
    return _Dump(total, hashing)


def _main_thread_dumps(out: Path) -> list[_Dump]:
    """The main thread's dumps (``out.N-01``), in the order callgrind wrote them."""
    dumps = {int(d.name[len(out.name) + 1 : -3]): d for d in out.parent.glob(f"{out.name}.*-01")}
    return [_read_dump(dumps[n]) for n in sorted(dumps)]


def _count_instructions(python: str, name: str) -> dict[str, Any]:
    """Main-thread instructions per bare call, added per instrumented call in each pair of
    blocks, and of those, the hashing library's (mean), counted by callgrind."""
    with tempfile.TemporaryDirectory() as where:
        out = Path(where) / "callgrind.out"
        command = [
            "valgrind",
            "--tool=callgrind",
            "--separate-threads=yes",
            "--instr-atstart=no",
            f"--dump-before={MARKER}",
            f"--callgrind-out-file={out}",
            python,
            __file__,
            "--worker",
            name,
            "--count-instructions",
            "--calls",
            str(INSTRUCTION_CALLS),
        ]
        done = subprocess.run(
            command, env=_worker_env(name), capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"{name} under callgrind failed:\n{done.stderr[-3000:]}")
        told = json.loads(done.stdout.strip().splitlines()[-1])
        dumps = _main_thread_dumps(out)
    labels = told["labels"]
    if len(dumps) != len(labels):
        raise RuntimeError(f"{name}: {len(dumps)} dumps for {len(labels)} markers")
    blocks: dict[str, list[_Dump]] = {"bare": [], "instrumented": []}
    for label, dump in zip(labels, dumps, strict=True):
        if label in blocks:
            blocks[label].append(dump)
    calls = told["calls"]
    pairs = list(zip(blocks["bare"], blocks["instrumented"], strict=True))
    return {
        "bare": statistics.mean(b.total for b in blocks["bare"]) / calls,
        "added": [(i.total - b.total) / calls for b, i in pairs],
        "hashing": statistics.mean((i.hashing - b.hashing) / calls for b, i in pairs),
    }


# --- the driver: one process per variant, several runs ---------------------------------------


def _python_for(name: str, given: dict[str, str], peers_dir: Path) -> str | None:
    if name in given:
        return given[name]
    if name in OWN_VENV:
        candidate = peers_dir / name / "bin" / "python"
        return str(candidate) if candidate.exists() else None
    return sys.executable


def make_venvs(peers_dir: Path) -> None:
    """Build the throwaway venvs of the peers that cannot live in the project's venv."""
    pins = [f"{d}=={metadata.version(d)}" for d in ("openai", "httpx2", "opentelemetry-sdk")]
    for name in OWN_VENV:
        dist = VARIANTS[name][0]
        assert dist is not None
        where = peers_dir / name
        if not (where / "bin" / "python").exists():
            subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
        pip = [str(where / "bin" / "python"), "-m", "pip", "install", "-q", *pins, dist]
        print(f"{name}: installing {dist} beside {', '.join(pins)}", flush=True)
        subprocess.run(pip, check=True)


def _worker_env(name: str) -> dict[str, str]:
    env = {**os.environ, **VARIANTS[name][1]}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent)
    return env


def _run_worker(python: str, name: str, args: argparse.Namespace) -> dict[str, Any]:
    command = [python, __file__, "--worker", name, "--calls", str(args.calls)]
    command += ["--blocks", str(args.blocks)]
    done = subprocess.run(
        command, env=_worker_env(name), capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"{name} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _spread(values: list[float], digits: int = 1) -> str:
    return f"{min(values):7.{digits}f} to {max(values):<7.{digits}f}"


def _instructions_available() -> str | None:
    """Why the instruction count cannot run here, or None."""
    for tool in ("valgrind", "callgrind_control"):
        if shutil.which(tool) is None:
            return f"{tool} not found: --instructions needs valgrind (apt-get install valgrind)"
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="rounds of one process per variant")
    parser.add_argument("--calls", type=int, default=200, help="calls per block")
    parser.add_argument("--blocks", type=int, default=8, help="pairs of blocks per process")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="also count main-thread instructions under callgrind (--runs 0: only those)",
    )
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--python", action="append", default=[], metavar="NAME=PATH")
    parser.add_argument("--peers-dir", type=Path, default=PEERS_DIR)
    parser.add_argument("--make-venvs", action="store_true")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--count-instructions", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        if args.count_instructions:
            instructions_worker(args.worker, args.calls)
        else:
            worker(args.worker, args.calls, args.blocks)
        return 0
    if args.instructions and (missing := _instructions_available()):
        print(missing, file=sys.stderr)
        return 2
    if args.make_venvs:
        make_venvs(args.peers_dir)
    given = dict(item.split("=", 1) for item in args.python)
    names = [n for n in args.variants.split(",") if n]
    pythons: dict[str, str] = {}
    for name in names:
        python = _python_for(name, given, args.peers_dir)
        if python is None:
            print(f"skipped {name}: no venv at {args.peers_dir / name} (--make-venvs builds it)")
        else:
            pythons[name] = python

    added: dict[str, dict[str, list[float]]] = {
        n: {"wall": [], "cpu": [], "proc": []} for n in pythons
    }
    bare: dict[str, list[float]] = {"wall": [], "cpu": []}
    sizes: dict[str, int] = {}
    content: dict[str, bool] = {}
    for run in range(args.runs):
        for name, python in pythons.items():
            result = _run_worker(python, name, args)
            sizes = result["sizes"]
            content[name] = result["content"]
            for clock in ("wall", "cpu", "proc"):
                added[name][clock].append(result[clock]["added"])
            for clock in ("wall", "cpu"):
                bare[clock].append(result[clock]["bare"])
        print(f"run {run + 1}/{args.runs} done", file=sys.stderr, flush=True)
    counted: dict[str, dict[str, Any]] = {}
    if args.instructions:
        for name, python in pythons.items():
            counted[name] = _count_instructions(python, name)
            print(f"{name} counted under callgrind", file=sys.stderr, flush=True)

    clocks = args.runs > 0
    if clocks:
        print(
            f"openai SDK chat.completions.create, request {sizes.get('request', 0):,} B, "
            f"response {sizes.get('response', 0):,} B, in-memory transport; {args.runs} runs "
            f"of one process per variant, each the median of {args.blocks} pairs of blocks "
            f"(bare, instrumented) of {args.calls} calls"
        )
        print(
            f"bare SDK call: wall {statistics.median(bare['wall']):.1f} µs, "
            f"app-thread CPU {statistics.median(bare['cpu']):.1f} µs (median over all processes)"
        )
    if counted:
        low = min(c["bare"] for c in counted.values()) / 1e6
        high = max(c["bare"] for c in counted.values()) / 1e6
        print(
            f"bare SDK call: {low:.2f} to {high:.2f} M main-thread instructions (each variant's "
            f"interpreter, callgrind, 2 pairs of blocks of {INSTRUCTION_CALLS} calls)"
        )
    print()
    header = f"{'added per call':<16}"
    if clocks:
        header += (
            f" {'wall med':>9} {'wall spread':>16} {'CPU µs med':>10} {'CPU spread':>16}"
            f" {'proc CPU':>9}"
        )
    if counted:
        header += f" {'M instr':>8} {'instr spread':>16} {'hashing':>8}"
    print(header + ("  content" if clocks else ""))
    median = {n: {c: statistics.median(v) for c, v in added[n].items()} for n in added if clocks}
    for name in pythons:
        row = f"{name:<16}"
        if clocks:
            row += (
                f" {median[name]['wall']:9.1f} {_spread(added[name]['wall']):>16}"
                f" {median[name]['cpu']:10.1f} {_spread(added[name]['cpu']):>16}"
                f" {median[name]['proc']:9.1f}"
            )
        if counted:
            row += f" {statistics.mean(counted[name]['added']) / 1e6:8.3f}"
            row += f" {_spread([a / 1e6 for a in counted[name]['added']], 3):>16}"
            row += f" {counted[name]['hashing'] / 1e6:8.3f}"
        print(row + (f"  {'yes' if content[name] else 'no'}" if clocks else ""))
    figures: list[tuple[str, str, dict[str, float]]] = []
    if clocks:
        figures += [
            (clock, label, {n: median[n][clock] for n in median})
            for clock, label in (("cpu", "app-thread CPU"), ("wall", "wall"))
        ]
    if counted:
        figures.append(
            (
                "instr",
                "main-thread instructions",
                {n: statistics.mean(c["added"]) for n, c in counted.items()},
            )
        )
    # the verdict: by instructions when counted (they do not move with the load), else CPU
    judged = "instr" if counted else "cpu"
    peers = [n for n in PEERS if n in pythons]
    missed = False
    if peers:
        print()
        for key, label, figure in figures:
            cheapest = min(peers, key=lambda n: figure[n])
            base = figure[cheapest]
            ratios = ", ".join(f"{n} {figure[n] / base:.2f}x" for n in figure)
            print(f"ratios to the cheapest peer by {label} ({cheapest}): {ratios}")
            if "otel-replay" in figure:
                ratio = figure["otel-replay"] / base
                verdict = "met" if ratio <= TARGET_RATIO else "MISSED"
                print(
                    f"  otel-replay {ratio:.2f}x {cheapest} (target <= {TARGET_RATIO}): {verdict}"
                )
                missed = missed or (key == judged and ratio > TARGET_RATIO)
        if "otel-replay" in counted:
            # valgrind emulates no SHA-NI: on hardware with it, hashing costs far less
            unhashed = {n: statistics.mean(c["added"]) - c["hashing"] for n, c in counted.items()}
            cheapest = min(peers, key=lambda n: unhashed[n])
            print(
                f"  without the hashing library's instructions: otel-replay "
                f"{unhashed['otel-replay'] / unhashed[cheapest]:.2f}x {cheapest}"
            )
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
