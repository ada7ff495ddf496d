"""The ``otel_replay`` instrumentor, loaded by ``opentelemetry-instrument``.

``OTEL_REPLAY_MODE=off`` makes it a no-op; under ``OTEL_REPLAY_MODE=replay`` it hands the
process's HTTP to a replay of ``OTEL_REPLAY_RUN``."""

from __future__ import annotations

import atexit
import importlib
import os
import weakref
from collections.abc import Callable, Collection
from types import ModuleType
from typing import Any

import wrapt
from opentelemetry import metrics, trace

# The module marks itself `# type: ignore`, so mypy sees none of its names.
from opentelemetry.instrumentation.instrumentor import (  # type: ignore[attr-defined]
    BaseInstrumentor,
)
from opentelemetry.instrumentation.utils import unwrap
from opentelemetry.sdk import trace as sdk_trace

from otel_replay import settings
from otel_replay._exit import alone, before_shutdown
from otel_replay.capture import package, transports
from otel_replay.capture._calls import CALL_SPANS
from otel_replay.capture._metrics import GenAiMetrics
from otel_replay.capture._recorder import Recorder
from otel_replay.capture.transports._httpx import async_wrapper, sync_wrapper
from otel_replay.envelope import hold_uuids, release_uuids, use_recorder, use_tool_lists
from otel_replay.envelope.frameworks import attach, detach
from otel_replay.errors import ConfigError
from otel_replay.redact import Redactor
from otel_replay.runs import (
    DurableFlush,
    StepTracer,
    adopt_root,
    describe_with,
    end_at_exit,
    exit_flush,
    hand_over_runs,
    handoff,
    seed_process,
    stop_handing_over,
    unwatch,
    use_tracer,
    watch,
)

__all__ = ["ReplayInstrumentor", "capture_content_enabled"]

_SCOPE = "otel_replay"
_VERSION = "0.1.0"


def capture_content_enabled() -> bool:
    """Content goes into spans unless ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``
    asks for none (``NO_CONTENT``, ``EVENT_ONLY``, ``false``): replay is the point."""
    value = os.environ.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "")
    return value.strip().lower() not in ("no_content", "event_only", "false", "0", "no")


class ReplayInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Records every httpx/httpx2, urllib3 (requests, botocore) and aiohttp call as a GenAI
    or HTTP step span with the replay kit.

    ``instrument(tracer_provider=..., meter_provider=...)`` takes the usual optional providers;
    settings come from the environment (see :mod:`otel_replay.settings`).
    """

    def __init__(self) -> None:
        super().__init__()
        self._wrapped: list[ModuleType] = []
        self._unwrap_transports: Callable[[], None] | None = None
        self.recorder: Recorder | None = None

    def instrumentation_dependencies(self) -> Collection[str]:
        return package._instruments

    def _instrument(self, **kwargs: Any) -> None:
        try:
            config = settings.load()
        except ConfigError as exc:
            if settings.replay_requested():
                from otel_replay.replay import refuse_to_replay  # noqa: PLC0415

                refuse_to_replay(str(exc))  # asked to replay: never run live instead
            settings.turn_off(exc)
            return
        if config.mode == "off":
            return
        # Steps outside any span nest under the process run's root span (_process_trace).
        tracer = StepTracer(
            trace.get_tracer(_SCOPE, _VERSION, tracer_provider=kwargs.get("tracer_provider"))
        )
        meter = metrics.get_meter(_SCOPE, _VERSION, meter_provider=kwargs.get("meter_provider"))
        content = capture_content_enabled()
        self.recorder = Recorder(
            tracer=tracer,
            redactor=Redactor(config.redact),
            handoff=handoff(),
            metrics=GenAiMetrics(meter),
            capture_content=content,
            # Bodies are content: NO_CONTENT keeps them out of the exported spans too.
            inline_limit=config.inline_limit if content else 0,
        )
        use_tracer(tracer)
        # GenAI spans other instrumentations start as roots nest under the process run's.
        wrapt.wrap_function_wrapper(sdk_trace, "Tracer.start_span", adopt_root)
        use_recorder(self.recorder)
        describe_with(self.recorder.redactor, content)  # a failed run's message (_failed)
        hand_over_runs()  # workers started fresh continue the current run
        use_tool_lists(config.write_tools, config.read_tools)
        attach()  # framework tools (LangChain, Agents SDK, MCP) as steps
        hold_uuids()  # the application's own uuid.uuid4() draws as value steps
        _add_durable_flush(kwargs.get("tracer_provider") or trace.get_tracer_provider())
        # Registered after the SDK's providers, so they run before their exit flush; the
        # process run's end (watch) after the streams still open have ended.
        watch()
        atexit.register(self.recorder.open_steps.finish_all)
        # The same, earlier: while a remote store's client still works (``_exit``).
        before_shutdown(self._end_before_shutdown, 20)
        for name in package.CLIENT_MODULES:
            try:
                module = importlib.import_module(name)
            except ImportError:
                continue
            wrapt.wrap_function_wrapper(
                module,
                "Client._send_single_request",
                sync_wrapper(self.recorder, module, config.ignore),
            )
            wrapt.wrap_function_wrapper(
                module,
                "AsyncClient._send_single_request",
                async_wrapper(self.recorder, module, config.ignore),
            )
            self._wrapped.append(module)
        # urllib3 (requests, botocore) and aiohttp, when installed. Calls to background
        # endpoints (OTEL_REPLAY_IGNORE) are not recorded by any seam.
        self._unwrap_transports = transports.instrument(self.recorder, config.ignore)
        if config.mode == "replay":
            # Under opentelemetry-instrument nothing else boots the replay (replay's own boot
            # has started it already otherwise): serve every request from the recording; the
            # wrappers above record the re-execution. The one import of replay by the capture.
            from otel_replay.replay import start_replay  # noqa: PLC0415

            start_replay(config)
        # After the replay has set the recorded seed, and before the program's first draw.
        seed_process()

    def _end_before_shutdown(self) -> None:
        """What the exit hooks do (end the steps still open, hand over the process run's end,
        end its root span, push the spans into the store), before the interpreter stops its
        thread pools; only the push while another thread may still record."""
        recorder = self.recorder
        if recorder is None:
            return
        final = alone()
        if final:
            recorder.open_steps.finish_all()
            end_at_exit()
        exit_flush(final=final)

    def _uninstrument(self, **kwargs: Any) -> None:
        for module in self._wrapped:
            unwrap(module.Client, "_send_single_request")
            unwrap(module.AsyncClient, "_send_single_request")
        self._wrapped.clear()
        if self._unwrap_transports is not None:
            self._unwrap_transports()
            self._unwrap_transports = None
        if self.recorder is not None:
            atexit.unregister(self.recorder.open_steps.finish_all)
            self.recorder.open_steps.finish_all()
            unwatch()
            detach()
            unwrap(sdk_trace.Tracer, "start_span")
            release_uuids()
        self.recorder = None
        stop_handing_over()
        use_tracer(None)
        use_recorder(None)
        describe_with(None, False)


_durable_providers: weakref.WeakSet[Any] = weakref.WeakSet()


def _add_durable_flush(provider: Any) -> None:
    """Give an SDK tracer provider (once) the processor that makes its ``force_flush``
    wait for the ``replay`` exporter (``runs.DurableFlush``), and the one that sees other
    instrumentations' call spans end (``_calls``); other providers have no processors."""
    add = getattr(provider, "add_span_processor", None)
    if add is None or provider in _durable_providers:
        return
    _durable_providers.add(provider)
    add(DurableFlush())
    add(CALL_SPANS)
