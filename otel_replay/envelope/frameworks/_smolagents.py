"""smolagents tools as tool steps, at ``Tool.__call__``."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from types import ModuleType
from typing import Any

from otel_replay.envelope._contract import schema_version
from otel_replay.envelope._effect import effect_of
from otel_replay.envelope._jsonable import encode, encode_exact, restore_body, return_hint
from otel_replay.envelope._steps import active, perform, tool_call
from otel_replay.envelope.frameworks._patch import unrecorded, wrap

__all__ = ["patch"]

_SANITIZE = "sanitize_inputs_outputs"


def patch(module: ModuleType) -> Callable[[], None]:
    """Make the tools of ``smolagents.tools.Tool`` steps; returns the undo."""
    base = module.Tool
    outputs = module.handle_agent_output_types
    if not callable(outputs):
        raise AttributeError("smolagents.tools.handle_agent_output_types is not a function")
    parameters = inspect.signature(vars(base)["__call__"]).parameters
    if _SANITIZE not in parameters:
        raise AttributeError(f"Tool.__call__ takes {list(parameters)}")

    def call(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
        if not active():
            return wrapped(*args, **kwargs)
        try:
            arguments = _arguments(instance, args, kwargs)
            name = str(instance.name)
            description = str(getattr(instance, "description", "") or "") or None
            forward = getattr(instance, "forward", None)
            if hasattr(forward, "__otel_replay_contract__"):
                return wrapped(*args, **kwargs)  # an @otel_replay.tool: its own step
            step = tool_call(
                name,
                encode(arguments),
                effect_of(name),
                description=description,
                schema_version=schema_version(
                    name,
                    description,
                    {"inputs": getattr(instance, "inputs", None)},
                    {"output_type": getattr(instance, "output_type", None)},
                ),
            )
        except Exception as exc:  # a call we cannot read: it runs as it would without us
            unrecorded("smolagents", exc)
            return wrapped(*args, **kwargs)
        returns = return_hint(forward)
        sanitized = bool(kwargs.get(_SANITIZE, False))
        output_type = getattr(instance, "output_type", None)

        def restored(body: bytes) -> Any:
            value = restore_body(body, returns)
            return outputs(value, output_type) if sanitized else value

        return perform(step, lambda: wrapped(*args, **kwargs), encode_exact, restored)

    return wrap(base, "__call__", call)


def _arguments(tool: Any, args: Any, kwargs: Any) -> dict[str, Any]:
    """The call's arguments by name, as ``Tool.__call__`` reads them: keywords, one dict of
    them, or positions in the order of the tool's ``inputs``."""
    given = {key: value for key, value in kwargs.items() if key != _SANITIZE}
    inputs = list(getattr(tool, "inputs", None) or ())
    one = args[0] if len(args) == 1 and not given else None
    if isinstance(one, dict) and all(key in inputs for key in one):
        return dict(one)
    if args:
        names = [*inputs, *(f"_{i}" for i in range(len(inputs), len(args)))]
        given = {names[i]: value for i, value in enumerate(args)} | given
    return given
