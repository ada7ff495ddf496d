"""LangGraph stores (long-term memory: ``InMemoryStore``, ``SqliteStore``, ``PostgresStore``,
any ``BaseStore``): what an agent reads of its memories is a step; on replay the user's store
is neither read nor written.

Every store operation goes through ``batch``/``abatch`` (a list of ``GetOp``, ``SearchOp``,
``ListNamespacesOp`` and ``PutOp``; ``put`` and ``delete`` are ``PutOp``s). A batch holding a
read is one ``checkpoint`` step named ``langgraph.store``: the reads are its arguments
(namespace, key, query, filter, paging), what they found its result (items as their
``dict()``, with ``otel_replay.store_item`` naming them). A batch of writes only is not a
step. On replay the reads are served as recorded, so the agent recalls what its recording
recalled, and the writes are dropped: a replay never adds to, changes or deletes a memory. A
recording made before these reads were steps has none: its replay reads the store live.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from otel_replay.envelope._jsonable import Unfit, encode, encode_exact, json_kind, restore_body
from otel_replay.envelope._steps import (
    Call,
    active,
    named_call,
    perform,
    perform_async,
    recorded_at,
    serving,
)
from otel_replay.envelope.frameworks._patch import unrecorded, wrap_subclasses

__all__ = ["patch"]

_FRAMEWORK = "LangGraph store"
_NAME = "langgraph.store"
_ITEM = "otel_replay.store_item"


def patch(module: ModuleType) -> Callable[[], None]:
    """Make the reads of every ``module.BaseStore`` a step and keep its writes from running
    under replay; returns the undo."""
    put_op: type[Any] = module.PutOp
    for name in ("GetOp", "SearchOp", "ListNamespacesOp", "Item", "SearchItem"):
        getattr(module, name)
    return wrap_subclasses(module.BaseStore, {"batch": _batch(put_op), "abatch": _abatch(put_op)})


def _call(reads: list[Any]) -> Call:
    return named_call("checkpoint", _NAME, encode([_read(op) for op in reads]), instant=False)


def _read(op: Any) -> dict[str, Any]:
    """A read op as its step's argument: its kind and fields, TTL refreshes left out."""
    fields = {k: v for k, v in op._asdict().items() if k != "refresh_ttl"}
    return {type(op).__name__: fields}


def _prepared(
    args: tuple[Any, ...], kwargs: dict[str, Any], put_op: type[Any]
) -> tuple[list[Any], list[int], Call | None] | None:
    """A batch's ops, the places of its reads and its step (None: writes only); None when
    nothing records or serves steps, or for a call shape we do not know (it runs
    unrecorded)."""
    if not active():
        return None
    try:
        ops = list(args[0] if args else kwargs["ops"])
        reads = [i for i, op in enumerate(ops) if not isinstance(op, put_op)]
        return ops, reads, _call([ops[i] for i in reads]) if reads else None
    except Exception as exc:
        unrecorded(_FRAMEWORK, exc)
        return None


def _merged(count: int, reads: list[int], found: list[Any]) -> list[Any]:
    """The batch's results: what the reads found (one each), in their places; ``None`` for
    the writes."""
    results: list[Any] = [None] * count
    for i, value in zip(reads, found, strict=True):
        results[i] = value
    return results


def _batch(put_op: type[Any]) -> Callable[..., Any]:
    def wrapper(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
        prepared = _prepared(args, kwargs, put_op)
        if prepared is None:
            return wrapped(*args, **kwargs)
        ops, reads, call = prepared
        if call is None:  # writes only
            return [None] * len(ops) if serving() else wrapped(ops)
        if serving():
            if recorded_at(call.kind, call.name):
                found = perform(call, lambda: _nothing(ops, reads), _record, _restorer(ops, reads))
            else:  # recorded before these reads were steps: read live, never written
                found = list(wrapped([ops[i] for i in reads]))
            return _merged(len(ops), reads, found)
        results: list[Any] = []

        def live() -> list[Any]:
            results.extend(wrapped(ops))
            return [results[i] for i in reads]

        perform(call, live, _record, _unused)
        return results

    return wrapper


def _abatch(put_op: type[Any]) -> Callable[..., Any]:
    def wrapper(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
        prepared = _prepared(args, kwargs, put_op)
        if prepared is None:
            return wrapped(*args, **kwargs)
        ops, reads, call = prepared

        async def batch() -> list[Any]:
            if call is None:
                return [None] * len(ops) if serving() else list(await wrapped(ops))
            if serving():
                if recorded_at(call.kind, call.name):
                    found = perform(
                        call, lambda: _nothing(ops, reads), _record, _restorer(ops, reads)
                    )
                else:  # recorded before these reads were steps: read live, never written
                    found = list(await wrapped([ops[i] for i in reads]))
                return _merged(len(ops), reads, found)
            results: list[Any] = []

            async def live() -> list[Any]:
                results.extend(await wrapped(ops))
                return [results[i] for i in reads]

            await perform_async(call, live, _record, _unused)
            return results

        return batch()

    return wrapper


def _nothing(ops: list[Any], reads: list[int]) -> list[Any]:
    """What a replay's reads find when no recorded batch answers them (a non-strict replay
    gone past its recording): nothing, for the store is not asked."""
    return [None if type(ops[i]).__name__ == "GetOp" else [] for i in reads]


def _record(found: list[Any]) -> bytes:
    return encode_exact([_tagged(value) for value in found])


def _tagged(value: Any) -> Any:
    base = sys.modules.get("langgraph.store.base")
    if base is not None and isinstance(value, base.Item):
        return {_ITEM: value.dict()}
    if isinstance(value, list):
        return [_tagged(item) for item in value]
    return value


def _unused(body: bytes) -> list[Any]:
    raise AssertionError("a recorded batch is served only under replay")


def _restorer(ops: list[Any], reads: list[int]) -> Callable[[bytes], list[Any]]:
    """What turns the recorded answer to the reads ``ops[i] for i in reads`` back into what
    each found (an ``Item`` or None for a get, ``SearchItem``s for a search, namespaces for a
    listing); raises :class:`Unfit` naming the first that is not."""

    def restored(body: bytes) -> list[Any]:
        found = restore_body(body)
        if not isinstance(found, list):
            raise Unfit(f"the recorded store batch is not a list of results: {json_kind(found)}")
        if len(found) != len(reads):
            raise Unfit(
                f"the recorded store batch answered {len(found)} reads, this one asks {len(reads)}"
            )
        return [
            _found(type(ops[i]).__name__, at, value)
            for at, (i, value) in enumerate(zip(reads, found, strict=True))
        ]

    return restored


def _found(op: str, at: int, value: Any) -> Any:
    """What the read ``op`` (``GetOp``...), the ``at``-th of its batch, found."""
    where = f"result {at} ({op})"
    if op == "GetOp":
        return None if value is None else _item(value, where, search=False)
    if not isinstance(value, list):
        raise Unfit(f"the recorded {where} is not a list: {json_kind(value)}")
    if op == "SearchOp":
        return [_item(item, where, search=True) for item in value]
    if op == "ListNamespacesOp":
        if not all(_is_namespace(namespace) for namespace in value):
            raise Unfit(f"the recorded {where} is not a list of namespaces")
        return [tuple(namespace) for namespace in value]
    return [_untagged(item) for item in value]  # a read this hook does not know yet


def _is_namespace(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and all(isinstance(part, str) for part in value)


_ITEM_TEXTS = ("key", "created_at", "updated_at")


def _item(value: Any, where: str, *, search: bool) -> Any:
    """A recorded store item (``{otel_replay.store_item: its dict()}``) as LangGraph's
    ``Item`` (``SearchItem`` when ``search``); ``where`` names its result in messages."""
    fields = value.get(_ITEM) if isinstance(value, dict) and len(value) == 1 else None
    if not isinstance(fields, dict):
        raise Unfit(f"the recorded {where} holds {json_kind(value)} that is no store item")
    for name in _ITEM_TEXTS:
        if not isinstance(fields.get(name), str):
            raise Unfit(f"a recorded store item of {where} has no {name} (a string)")
    if not _is_namespace(fields.get("namespace")):
        raise Unfit(f"a recorded store item of {where} has no namespace (strings)")
    if not isinstance(fields.get("value"), dict):
        raise Unfit(f"a recorded store item of {where} has no value (an object)")
    score = fields.get("score")
    if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))):
        raise Unfit(f"a recorded store item of {where} has a score that is no number")
    from langgraph.store.base import Item, SearchItem  # noqa: PLC0415 - an item was recorded

    made = {name: fields[name] for name in (*_ITEM_TEXTS, "value")}
    made["namespace"] = tuple(fields["namespace"])
    try:
        return SearchItem(**made, score=score) if search else Item(**made)
    except ValueError:  # a time that is not ISO 8601
        raise Unfit(f"a recorded store item of {where} has a time that is not ISO 8601") from None


def _untagged(value: Any) -> Any:
    if isinstance(value, list):
        return [_untagged(item) for item in value]
    if isinstance(value, dict) and len(value) == 1 and isinstance(value.get(_ITEM), dict):
        return _item(value, "batch", search="score" in value[_ITEM])
    return value
