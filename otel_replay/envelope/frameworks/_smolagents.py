"""smolagents tools as tool steps.

The seam is ``Tool.__call__`` (``smolagents.tools``): the one way an agent runs a tool, a
``ToolCallingAgent`` (``tool(**arguments, sanitize_inputs_outputs=True)``) or the code a
``CodeAgent`` runs (``lookup_order(order_id="A-1234")``), for every tool: ``@tool`` functions,
``Tool`` subclasses, ``final_answer``. The agent's own checks of the arguments
(``validate_tool_arguments``), its error wording and its memory run around it as they do
without us. An agent managed by another is no ``Tool``: its calls are the steps of its own run.

What is recorded is what the call returned (after smolagents turned a text into an
``AgentText``), as exact JSON, or the exception it raised. Replay restores the value with the
return annotation of the tool's ``forward`` and, as smolagents did, through
``handle_agent_output_types`` when the agent asked for it, so the agent sees the same text or
object. A tool whose ``forward`` is an ``@otel_replay.tool`` is that function's own step.
"""

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
