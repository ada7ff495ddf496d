"""An agent that records steps outside any ``run()`` block until SIGTERM stops it.

    python tests/export/_sigterm_agent.py TOOLS_URL [options]

It fetches ``TOOLS_URL/orders/A-1000``, ``A-1001``, ... with httpx, printing ``step N`` once
step N's response was read (its span has ended), a short pause between steps.

``--idle-after N``       after N steps, print ``idle`` and wait (no step in flight)
``--self-kill N``        after N steps, send itself SIGTERM (a parent shell sees the status)
``--exit-after N``       after N steps, print ``exiting`` and leave: a normal exit
``--slow CHAT_URL N``    after N steps, print ``slow call`` and make a chat call (model
                         ``standin-slow``, timeout 30 s) to CHAT_URL, which answers late or
                         never: a step in flight when the signal comes
``--chain``              after start-up, install a handler that prints ``handler ran`` and calls
                         the handler it replaced (ours)
``--flag-first``         before the SDK is set up (so before ours), install a handler that
                         prints ``handler ran`` and asks the loop to stop; the program then
                         prints ``stopped gracefully`` and exits 0
``--in-code``            set the SDK up here (OTLP over HTTP to ``OTEL_EXPORTER_OTLP_ENDPOINT``
                         and the replay exporter, both batched) instead of under
                         ``opentelemetry-instrument``
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import time
from types import FrameType

stop = False


def _option(name: str, count: int = 1) -> list[str] | None:
    if name not in sys.argv:
        return None
    at = sys.argv.index(name)
    return sys.argv[at + 1 : at + 1 + count]


def _set_up_in_code() -> None:
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from otel_replay.capture.instrumentor import ReplayInstrumentor
    from otel_replay.export import ReplaySpanExporter

    provider = TracerProvider(resource=Resource.create({"service.name": "sigterm-test"}))
    endpoint = os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"]
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(f"{endpoint}/v1/traces")))
    provider.add_span_processor(BatchSpanProcessor(ReplaySpanExporter()))
    trace.set_tracer_provider(provider)
    ReplayInstrumentor().instrument()


def main() -> None:
    # A test that finds the agent still alive long after the signal asks for its threads'
    # stacks (to stderr) before it kills it.
    faulthandler.register(signal.SIGUSR1, all_threads=True)

    def ask_to_stop(signum: int, frame: FrameType | None) -> None:
        global stop  # noqa: PLW0603
        print("handler ran", flush=True)
        stop = True

    if "--flag-first" in sys.argv:
        signal.signal(signal.SIGTERM, ask_to_stop)
    if "--in-code" in sys.argv:
        _set_up_in_code()
    if "--chain" in sys.argv:
        replaced = signal.getsignal(signal.SIGTERM)
        assert callable(replaced), replaced  # ours, installed by the replay exporter

        def chain(signum: int, frame: FrameType | None) -> None:
            print("handler ran", flush=True)
            replaced(signum, frame)

        signal.signal(signal.SIGTERM, chain)

    import httpx

    idle_after = int((_option("--idle-after") or ["-1"])[0])
    self_kill = int((_option("--self-kill") or ["-1"])[0])
    exit_after = int((_option("--exit-after") or ["-1"])[0])
    slow = _option("--slow", 2)
    with httpx.Client(base_url=sys.argv[1]) as client:
        step = 0
        while not stop:
            client.get(f"/orders/A-{1000 + step}").raise_for_status()
            print(f"step {step}", flush=True)
            step += 1
            if step == idle_after:
                print("idle", flush=True)
                time.sleep(600)
            if step == self_kill:
                os.kill(os.getpid(), signal.SIGTERM)
            if step == exit_after:
                print("exiting", flush=True)
                return
            if slow is not None and step == int(slow[1]):
                print("slow call", flush=True)
                body = {"model": "standin-slow", "messages": [{"role": "user", "content": "hi"}]}
                client.post(slow[0], json=body, timeout=30)
            time.sleep(0.02)
    print("stopped gracefully", flush=True)


if __name__ == "__main__":
    main()
