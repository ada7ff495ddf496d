"""LangGraph checkpointers: what a graph reads of its saved state is a step; a replay neither
reads nor writes the user's checkpoint store."""

from __future__ import annotations

import contextvars
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from otel_replay.envelope._jsonable import Unfit, encode, encode_exact, json_kind, restore_body
from otel_replay.envelope._steps import (
    Call,
    active,
    forked_answer,
    named_call,
    perform,
    perform_async,
    recorded_at,
    serving,
)
from otel_replay.envelope.frameworks._langgraph_shadow import MISSING, Shadow, shadow_of
from otel_replay.envelope.frameworks._langgraph_values import tagged, untagged
from otel_replay.envelope.frameworks._patch import unrecorded, wrap_subclasses

__all__ = ["patch"]

_FRAMEWORK = "LangGraph checkpointer"
# Set while a saver method runs: the saver methods it calls are part of its step.
_inside: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "otel_replay_checkpointer", default=False
)


def patch(module: ModuleType) -> Callable[[], None]:
    """Make the reads of every ``module.BaseCheckpointSaver`` a step and keep its writes from
    running under replay; returns the undo. Raises AttributeError for a LangGraph whose
    saver does not have the methods this relies on."""
    base: type[Any] = module.BaseCheckpointSaver
    tuple_class: type[Any] = module.CheckpointTuple
    for name in ("get_tuple", "list", "put", "put_writes"):
        getattr(base, name)
    return wrap_subclasses(base, _wrappers(tuple_class))


@dataclass(frozen=True, slots=True)
class _Read:
    """One read method: its step's name, its arguments as recorded, the saver's value from
    the recorded JSON, and the replay's answer (:class:`Shadow`) given the recorded value
    and whether a fork put that value in the recording's place."""

    step: str
    arguments: Callable[[tuple[Any, ...], dict[str, Any]], bytes]
    rebuild: Callable[[Any], Any]
    replayed: Callable[[Shadow, tuple[Any, ...], dict[str, Any], Any, bool], Any]
    many: bool = False


def _wrappers(tuple_class: type[Any]) -> dict[str, Callable[..., Any]]:
    def one(value: Any) -> Any:
        return None if value is None else _checkpoint_tuple(tuple_class, value)

    def many(value: Any) -> list[Any]:
        return [_checkpoint_tuple(tuple_class, item) for item in _list_of(value)]

    get_tuple = _Read("get_tuple", _config_arguments, one, _replayed_get_tuple)
    listed = _Read("list", _list_arguments, many, _replayed_list, many=True)
    delta = _Read("get_delta_channel_history", _delta_arguments, _delta, _replayed_delta)
    wrappers = {
        "get_tuple": _read(get_tuple),
        "aget_tuple": _aread(get_tuple),
        "list": _read(listed),
        "alist": _aread(listed),
        "get_delta_channel_history": _read(delta),
        "aget_delta_channel_history": _aread(delta),
    }
    for name in _WRITES:
        wrappers[name] = _write(name)
        wrappers[f"a{name}"] = _awrite(name)
    return wrappers


_WRITES = ("put", "put_writes", "delete_thread", "delete_for_runs", "copy_thread", "prune")


def _replayed_get_tuple(
    shadow: Shadow, args: tuple[Any, ...], kwargs: dict[str, Any], recorded: Any, forked: bool
) -> Any:
    return shadow.get_tuple(_argument(args, kwargs, 0, "config"), recorded, forked=forked)


def _replayed_list(
    shadow: Shadow, args: tuple[Any, ...], kwargs: dict[str, Any], recorded: Any, forked: bool
) -> list[Any]:
    return shadow.list(
        _argument(args, kwargs, 0, "config"),
        kwargs.get("filter"),
        kwargs.get("before"),
        kwargs.get("limit"),
        recorded,
        forked=forked,
    )


def _replayed_delta(
    shadow: Shadow, args: tuple[Any, ...], kwargs: dict[str, Any], recorded: Any, forked: bool
) -> Any:
    return shadow.delta(kwargs.get("config"), kwargs.get("channels"), recorded, forked=forked)


# -- reads ------------------------------------------------------------------------------


def _record(value: Any) -> bytes:
    if isinstance(value, tuple) and hasattr(value, "_asdict"):
        value = value._asdict()
    elif isinstance(value, list):
        value = [item._asdict() if hasattr(item, "_asdict") else item for item in value]
    return encode_exact(tagged(value))


def _replayed(
    call: Call, read: _Read, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """Under replay, the read's answer: the replay's shadow given the matched recorded read
    (or, when none matched, the shadow alone); the shadow alone as well for a recording with
    no such step (a foreign trace). A fork's change at the read is the answer, whatever the
    shadow holds."""
    shadow = shadow_of(instance)

    def own() -> Any:
        return read.replayed(shadow, args, kwargs, MISSING, False)

    def recorded(body: bytes) -> Any:
        forked = forked_answer()
        value = read.rebuild(untagged(restore_body(body)))
        return read.replayed(shadow, args, kwargs, value, forked)

    if not recorded_at(call.kind, call.name):
        return own()
    return perform(call, own, _record, recorded)


def _unused(body: bytes) -> Any:
    raise AssertionError("a recorded read is served only under replay")


def _step_call(read: _Read, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Call | None:
    """The step ``read`` makes, or None when it makes none: called by another saver method,
    nothing records or serves steps, or a call shape we do not know (it runs unrecorded)."""
    if _inside.get() or not active():
        return None
    try:
        return named_call(
            "checkpoint", f"langgraph.{read.step}", read.arguments(args, kwargs), instant=False
        )
    except Exception as exc:
        unrecorded(_FRAMEWORK, exc)
        return None


def _read(read: _Read) -> Callable[..., Any]:
    def wrapper(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
        call = _step_call(read, args, kwargs)
        if call is None:
            return wrapped(*args, **kwargs)
        token = _inside.set(True)
        try:
            if serving():
                value = _replayed(call, read, instance, args, kwargs)
            elif read.many:
                value = perform(call, lambda: list(wrapped(*args, **kwargs)), _record, _unused)
            else:
                value = perform(call, lambda: wrapped(*args, **kwargs), _record, _unused)
        finally:
            _inside.reset(token)
        return iter(value) if read.many else value

    return wrapper


def _aread(read: _Read) -> Callable[..., Any]:
    """The async form: a coroutine, or for ``many`` an async iterator, as the saver's."""

    def wrapper(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
        call = _step_call(read, args, kwargs)
        if call is None:
            return wrapped(*args, **kwargs)

        async def live() -> Any:
            if read.many:
                return [item async for item in wrapped(*args, **kwargs)]
            return await wrapped(*args, **kwargs)

        async def step() -> Any:
            token = _inside.set(True)
            try:
                if serving():
                    return _replayed(call, read, instance, args, kwargs)
                return await perform_async(call, live, _record, _unused)
            finally:
                _inside.reset(token)

        if not read.many:
            return step()

        async def items() -> AsyncIterator[Any]:
            for value in await step():
                yield value

        return items()

    return wrapper


def _config(config: Any) -> dict[str, Any] | None:
    """What of a ``RunnableConfig`` addresses a checkpoint: its thread and namespace, and
    whether it names one checkpoint (``pinned``). Not which, nor a subgraph's task: checkpoint
    ids are drawn at random, so a replay's differ from its recording's. The rest is the
    application's, or LangGraph's own live objects."""
    if config is None:
        return None
    configurable = config.get("configurable") or {}
    found = {
        key: configurable[key] for key in ("thread_id", "checkpoint_ns") if key in configurable
    }
    namespace = found.get("checkpoint_ns")
    if isinstance(namespace, str) and namespace:
        found["checkpoint_ns"] = _without_task_ids(namespace)
    if configurable.get("checkpoint_id"):
        found["pinned"] = True
    return found


def _without_task_ids(namespace: str) -> str:
    """A subgraph's namespace (``node:<task id>|inner:<task id>``) without its task ids,
    which LangGraph derives from checkpoint ids: ``node|inner``."""
    return "|".join(part.split(":", 1)[0] for part in namespace.split("|"))


def _argument(args: tuple[Any, ...], kwargs: dict[str, Any], position: int, name: str) -> Any:
    return args[position] if len(args) > position else kwargs.get(name)


def _config_arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bytes:
    return encode({"config": _config(_argument(args, kwargs, 0, "config"))})


def _list_arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bytes:
    return encode(
        {
            "config": _config(_argument(args, kwargs, 0, "config")),
            "filter": kwargs.get("filter"),
            "before": _config(kwargs.get("before")),
            "limit": kwargs.get("limit"),
        }
    )


def _delta_arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bytes:
    return encode({"config": _config(kwargs.get("config")), "channels": kwargs.get("channels")})


def _list_of(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise Unfit(
            f"the recorded checkpoint list is not a list of checkpoints: {json_kind(value)}"
        )
    return value


def _delta(value: Any) -> dict[str, Any]:
    """A recorded ``get_delta_channel_history``: each channel's history (an object)."""
    if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
        raise Unfit("the recorded channel history is not an object of objects by channel")
    return value


# What LangGraph (and the replay's shadow saver) reads of every checkpoint without a default.
_CHECKPOINT_OBJECTS = ("channel_values", "channel_versions", "versions_seen")


def _checkpoint_tuple(tuple_class: type[Any], value: Any) -> Any:
    """A recorded checkpoint tuple (its fields as a dict) as the saver's ``CheckpointTuple``;
    fields this LangGraph does not know are left out, those it lacks take their defaults.
    Raises :class:`Unfit` naming what is missing or of the wrong kind: LangGraph would fail
    on it later, deep in the graph's loop."""
    if not isinstance(value, dict):
        raise Unfit(f"the recorded checkpoint is not a checkpoint tuple: {json_kind(value)}")
    fields = {key: item for key, item in value.items() if key in tuple_class._fields}
    for name in ("config", "checkpoint", "metadata"):
        if name not in fields:
            raise Unfit(f"the recorded checkpoint tuple has no {name}")
        if not isinstance(fields[name], dict):
            found = json_kind(fields[name])
            raise Unfit(f"the recorded checkpoint tuple's {name} is not an object: {found}")
    if not _is_config(fields["config"]):
        raise Unfit("the recorded checkpoint's config has no configurable object")
    checkpoint = fields["checkpoint"]
    if not isinstance(checkpoint.get("id"), str):
        raise Unfit("the recorded checkpoint has no id (a string)")
    for name in _CHECKPOINT_OBJECTS:
        if not isinstance(checkpoint.get(name), dict):
            raise Unfit(f"the recorded checkpoint's {name} is not an object")
    parent = fields.get("parent_config")
    if parent is not None and not _is_config(parent):
        raise Unfit("the recorded checkpoint's parent_config is neither null nor a config")
    writes = fields.get("pending_writes")
    if writes is not None:
        if not isinstance(writes, list) or not all(_is_write(write) for write in writes):
            raise Unfit(
                "the recorded checkpoint's pending_writes are not a list of "
                "[task id, channel, value]"
            )
        fields["pending_writes"] = [tuple(write) for write in writes]
    return tuple_class(**fields)


def _is_config(config: Any) -> bool:
    return isinstance(config, dict) and isinstance(config.get("configurable"), dict)


def _is_write(write: Any) -> bool:
    return (
        isinstance(write, (list, tuple))
        and len(write) == 3
        and isinstance(write[0], str)
        and isinstance(write[1], str)
    )


# -- writes -----------------------------------------------------------------------------


def _write(method: str) -> Callable[..., Any]:
    def wrapper(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
        if _inside.get() or not serving():
            return wrapped(*args, **kwargs)
        token = _inside.set(True)
        try:
            return shadow_of(instance).write(method, args, kwargs)
        finally:
            _inside.reset(token)

    return wrapper


def _awrite(method: str) -> Callable[..., Any]:
    def wrapper(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
        if _inside.get() or not serving():
            return wrapped(*args, **kwargs)

        async def written() -> Any:
            token = _inside.set(True)
            try:
                return shadow_of(instance).write(method, args, kwargs)
            finally:
                _inside.reset(token)

        return written()

    return wrapper
