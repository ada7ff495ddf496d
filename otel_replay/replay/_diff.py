"""What differs between a recorded request and the one today's code sent, field by field."""

from __future__ import annotations

import contextlib
import difflib
import json
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from otel_replay._bodies import header, is_sse
from otel_replay._bodies import json_value as parse_json
from otel_replay._canonical import canonical_json, sha256_tag
from otel_replay._forks import mend_in_child
from otel_replay.codecs import CODECS, Codec, LlmRequest
from otel_replay.codecs import prompt_hash as content_prompt_hash
from otel_replay.envelope import ENVELOPE_KINDS
from otel_replay.errors import CodecError
from otel_replay.replay._change import Change, body_change, category, change, preview, whole
from otel_replay.replay._model import RecordedStep

__all__ = [
    "MintedIds",
    "Request",
    "answer_messages",
    "category",
    "comparable_prompts",
    "endpoint_codec",
    "json_list",
    "json_paths_differing",
    "llm_changes",
    "message_changes",
    "normal_message",
    "parse_json",
    "preview",
    "recorded_llm",
    "request_changes",
    "short_tag",
    "tool_call_ids",
    "tool_schema_version",
    "value_at",
    "without_trace_context",
]

TRACE_CONTEXT_KEYS: frozenset[str] = frozenset({"traceparent", "tracestate", "baggage"})
"""What an OpenTelemetry propagator writes into a JSON-RPC message's ``params._meta`` (MCP
clients do, SEP-414): a new trace id on every run, not part of what is asked."""


@dataclass(frozen=True, slots=True)
class Request:
    """A request today's code sent: method, full URL and the exact (redacted) body."""

    method: str
    url: str
    body: bytes


def without_trace_context(value: Any) -> Any:
    """A parsed JSON-RPC request (or batch) without the trace context in its ``params._meta``
    (:data:`TRACE_CONTEXT_KEYS`), a ``_meta`` left empty dropped; any other value as it is."""
    if _is_list(value):
        return [without_trace_context(item) for item in value]
    if not isinstance(value, Mapping) or "jsonrpc" not in value:
        return value
    params = value.get("params")
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    if not isinstance(meta, Mapping) or not TRACE_CONTEXT_KEYS & meta.keys():
        return value
    kept = {k: v for k, v in meta.items() if k not in TRACE_CONTEXT_KEYS}
    others = {k: v for k, v in params.items() if k != "_meta"}  # type: ignore[union-attr]
    return {**value, "params": {**others, **({"_meta": kept} if kept else {})}}


def request_changes(recorded: RecordedStep, new: Request) -> list[Change]:
    """Every difference between ``recorded``'s request and ``new``; empty when they are the
    same call (for a step with request bytes: the same bytes, or bytes equal as canonical JSON
    once volatile fields are set aside by the matcher)."""
    path = urlsplit(new.url).path
    new_json = parse_json(new.body)
    codec = endpoint_codec(recorded.endpoint)
    if codec is not None and isinstance(new_json, Mapping):
        new_llm = _parse(codec, path, new_json)
        old_llm = _recorded_llm(codec, recorded)
        if new_llm is not None and old_llm is not None:
            return llm_changes(old_llm, new_llm, recorded, partial=recorded.request_body is None)
    return _http_changes(recorded, new, new_json)


def llm_changes(
    old: LlmRequest, new: LlmRequest, recorded: RecordedStep, *, partial: bool = False
) -> list[Change]:
    """The differences between two model calls in the user's terms.

    ``partial``: ``old`` was rebuilt from another instrumentation's span attributes, which
    carry only ``gen_ai.request.*`` parameters (and may not say whether the call streamed)
    and write messages in their own way (``"name": null``, a tool call before the text, a
    ``developer`` role); only what they carry is compared, and messages as what they say
    (:func:`comparable_prompts`), never by a hash of how that producer wrote them.
    """
    changes: list[Change] = []
    if old.model != new.model:
        changes.append(change("model", old.model, new.model))
    old_params = {"gen_ai.request.stream": old.stream, **old.attributes}
    new_params = {"gen_ai.request.stream": new.stream, **new.attributes}
    if partial:
        new_params = {k: v for k, v in new_params.items() if k.startswith("gen_ai.request.")}
        if "gen_ai.request.stream" not in recorded.attributes:
            del old_params["gen_ai.request.stream"], new_params["gen_ai.request.stream"]
    for key in sorted(old_params.keys() | new_params.keys()):
        if key == "gen_ai.request.model":
            continue
        before, after = old_params.get(key), new_params.get(key)
        if before != after:
            name = "parameter " + key.removeprefix("gen_ai.request.")
            changes.append(change(name, before, after))
    if not partial:
        old_prompt = recorded.prompt_hash or prompt_hash(old)
        new_prompt = prompt_hash(new)
        if old_prompt != new_prompt:
            changes.append(change("prompt hash", short_tag(old_prompt), short_tag(new_prompt)))
        changes.extend(_prompt_changes(old.system_instructions, old.input_messages, new))
    elif "gen_ai.input.messages" in recorded.attributes:
        old_system, old_messages, new_system, new_messages = comparable_prompts(
            old, new, system_known="gen_ai.system_instructions" in recorded.attributes
        )
        changes.extend(_prompt_changes(old_system, old_messages, new, new_system, new_messages))
    elif recorded.prompt_hash is not None:
        # Our own span without its bytes or its content: the hash is ours, computed as now.
        new_prompt = prompt_hash(new)
        if recorded.prompt_hash != new_prompt:
            changes.append(
                change("prompt hash", short_tag(recorded.prompt_hash), short_tag(new_prompt))
            )
    old_tools = tool_schema_version(old)
    new_tools = tool_schema_version(new)
    # A span that does not record the tools offered (the official openai instrumentation's)
    # leaves them unknown, not absent.
    tools_known = not partial or "gen_ai.tool.definitions" in recorded.attributes
    if tools_known and old_tools != new_tools:
        changes.append(change("tool schema version", short_tag(old_tools), short_tag(new_tools)))
        changes.extend(_tool_changes(old.tool_definitions, new.tool_definitions))
    return changes


def _prompt_changes(
    old_system: list[Any],
    old_messages: list[Any],
    new: LlmRequest,
    new_system: list[Any] | None = None,
    new_messages: list[Any] | None = None,
) -> list[Change]:
    """System instructions, then messages: what differs between the two prompts."""
    new_system = new.system_instructions if new_system is None else new_system
    new_messages = new.input_messages if new_messages is None else new_messages
    changes: list[Change] = []
    if canonical_json(old_system) != canonical_json(new_system):
        before, after = _text(old_system) or None, _text(new_system) or None
        if before != after:
            changes.append(change("system instructions", before, after))
        else:  # the same text, parts of other kinds or fields
            changes.extend(_paths_changes("system instructions", old_system, new_system))
    changes.extend(message_changes(old_messages, new_messages))
    return changes


_ROLES = {"developer": "system"}
"""Roles that mean the same to a model call's prompt (OpenAI's ``developer`` is the system
prompt of its newer models; the capture writes it ``system``)."""


def normal_message(message: Any) -> Any:
    """A GenAI message as it compares across producers: no field set to null, the role
    named as the capture names it, empty text parts dropped, text parts before the others
    (producers order a turn's text and its tool calls differently), a tool call's arguments
    parsed when written as a JSON string."""
    if not isinstance(message, Mapping):
        return message
    out = {k: v for k, v in message.items() if v is not None and k not in ("role", "parts")}
    role = message.get("role")
    out["role"] = _ROLES.get(role, role) if isinstance(role, str) else role
    parts = message.get("parts")
    if isinstance(parts, list):
        kept = [_normal_part(p) for p in parts if not _empty_text(p)]
        out["parts"] = sorted(kept, key=lambda p: not (isinstance(p, Mapping) and _is_text(p)))
    elif parts is not None:
        out["parts"] = parts
    return out


def _normal_part(part: Any) -> Any:
    if not isinstance(part, Mapping):
        return part
    out = {k: v for k, v in part.items() if v is not None}
    arguments = out.get("arguments")
    if out.get("type") == "tool_call" and isinstance(arguments, str):
        with contextlib.suppress(ValueError):
            out["arguments"] = json.loads(arguments)
    if out.get("arguments") == "":
        del out["arguments"]
    return out


def _is_text(part: Mapping[str, Any]) -> bool:
    return part.get("type") == "text"


def _empty_text(part: Any) -> bool:
    return isinstance(part, Mapping) and _is_text(part) and not part.get("content")


def comparable_prompts(
    old: LlmRequest, new: LlmRequest, *, system_known: bool
) -> tuple[list[Any], list[Any], list[Any], list[Any]]:
    """The system instructions and messages of a call rebuilt from another producer's span
    (``old``) and of today's (``new``), in one form: messages as :func:`normal_message`
    makes them; instructions kept apart on one side only moved to the head of its messages
    as a ``system`` turn (the other side keeps them among its messages); message fields the
    recorded messages never carry (a producer that does not record ``name``) set aside.
    ``system_known``: the span records system instructions; without them, and without any
    system turn among the recorded messages, the system prompt is unknown and not compared.
    """
    old_system = [_normal_part(p) for p in old.system_instructions if not _empty_text(p)]
    new_system = [_normal_part(p) for p in new.system_instructions if not _empty_text(p)]
    old_messages = [normal_message(m) for m in old.input_messages]
    new_messages = [normal_message(m) for m in new.input_messages]
    if not system_known and not any(_role(m) == "system" for m in old_messages):
        new_system = []
        new_messages = [m for m in new_messages if _role(m) != "system"]
    if old_system and not new_system:
        old_messages, old_system = [{"role": "system", "parts": old_system}, *old_messages], []
    elif new_system and not old_system:
        new_messages, new_system = [{"role": "system", "parts": new_system}, *new_messages], []
    fields = {"role", "parts"}.union(*(m.keys() for m in old_messages if isinstance(m, Mapping)))
    new_messages = [
        {k: v for k, v in m.items() if k in fields} if isinstance(m, Mapping) else m
        for m in new_messages
    ]
    return old_system, old_messages, new_system, new_messages


def _role(message: Any) -> Any:
    return message.get("role") if isinstance(message, Mapping) else None


def prompt_hash(llm: LlmRequest) -> str:
    """``replay.prompt.hash`` as the capture computes it."""
    return content_prompt_hash(
        canonical_json(llm.input_messages), canonical_json(llm.system_instructions)
    )


def tool_schema_version(llm: LlmRequest) -> str | None:
    """``replay.tool.schema.version`` as the capture computes it (None without tools)."""
    if not llm.tool_definitions:
        return None
    return sha256_tag(canonical_json(llm.tool_definitions))


def json_paths_differing(old: Any, new: Any, prefix: str = "$") -> list[str]:
    """The JSON paths (``$.messages[2].content``) where two JSON values differ, leaves only."""
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        out: list[str] = []
        for key in sorted(old.keys() | new.keys()):
            if old.get(key, _MISSING) != new.get(key, _MISSING):
                at = f"{prefix}{_member(key)}"
                if key in old and key in new:
                    out.extend(json_paths_differing(old[key], new[key], at))
                else:
                    out.append(at)
        return out
    if _is_list(old) and _is_list(new):
        out = []
        for i in range(max(len(old), len(new))):
            if i >= len(old) or i >= len(new):
                out.append(f"{prefix}[{i}]")
            elif old[i] != new[i]:
                out.extend(json_paths_differing(old[i], new[i], f"{prefix}[{i}]"))
        return out
    return [] if old == new else [prefix]


_MISSING = object()
_PLAIN_KEY = re.compile(r"[^.\[\]\"'\s]+")
# One step of a path: ``.key``, ``[2]`` or ``["a key.with dots"]`` (JSON-quoted).
_PATH_STEP = re.compile(r'\.([^.\[]+)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]')


def _member(key: str) -> str:
    """``key`` as a step of a JSON path: ``.key``, or ``["key"]`` when it holds what a path
    uses (a dot, a bracket, a quote, a space) or is empty, so it reads as one key."""
    return f".{key}" if _PLAIN_KEY.fullmatch(key) else f"[{json.dumps(key, ensure_ascii=False)}]"


def _is_list(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def endpoint_codec(endpoint: str) -> Codec | None:
    """The provider codec named ``endpoint`` (``openai.chat_completions``); None for a step
    that is no model call."""
    return next((c for c in CODECS if c.name == endpoint), None)


def _parse(codec: Codec, path: str, body: Mapping[str, Any]) -> LlmRequest | None:
    try:
        return codec.parse_request(path, body)
    except CodecError:
        return None


def recorded_llm(recorded: RecordedStep) -> LlmRequest | None:
    """The model call a recorded step made, from its bytes or (without them) its GenAI span
    attributes; None for a step that is not a model call, or whose body its codec refuses."""
    codec = endpoint_codec(recorded.endpoint)
    return None if codec is None else _recorded_llm(codec, recorded)


def answer_messages(recorded: RecordedStep) -> list[Any] | None:
    """The output messages of a model step's response, read by its provider's codec; None
    for a step that is no model call, has no response, or whose body the codec refuses."""
    codec = endpoint_codec(recorded.endpoint)
    status = recorded.step.status_code
    if codec is None or status is None:
        return None
    streamed = is_sse(header(recorded.step.response_headers, "content-type"))
    try:
        return codec.parse_response(status, recorded.step.response_body, streamed).output_messages
    except (CodecError, ValueError, RecursionError):
        return None


def _recorded_llm(codec: Codec, recorded: RecordedStep) -> LlmRequest | None:
    body = parse_json(recorded.request_body)
    if isinstance(body, Mapping):
        path = urlsplit(recorded.step.url).path if recorded.step.url else ""
        return _parse(codec, path, body)
    if recorded.request_body is not None:
        return None
    return _llm_from_attributes(recorded.attributes)


def _llm_from_attributes(attrs: Mapping[str, Any]) -> LlmRequest:
    """A model call rebuilt from GenAI span attributes (a span without request bytes)."""
    params = {
        k: _plain(v)
        for k, v in attrs.items()
        if k.startswith("gen_ai.request.") and k != "gen_ai.request.stream"
    }
    model = attrs.get("gen_ai.request.model")
    return LlmRequest(
        operation=str(attrs.get("gen_ai.operation.name", "chat")),
        provider=str(attrs.get("gen_ai.provider.name", "")),
        model=model if isinstance(model, str) else None,
        stream=bool(attrs.get("gen_ai.request.stream", False)),
        attributes=params,
        system_instructions=json_list(attrs.get("gen_ai.system_instructions")),
        input_messages=json_list(attrs.get("gen_ai.input.messages")),
        tool_definitions=json_list(attrs.get("gen_ai.tool.definitions")),
    )


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def json_list(value: Any) -> list[Any]:
    """A span attribute holding a JSON array, as a list (``[]`` when it holds none)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return []
    return list(value) if _is_list(value) else []


def short_tag(tag: str | None) -> str | None:
    """A ``sha256:<hex>`` tag cut to 12 hex digits, enough to tell two apart in a report."""
    return tag[:19] if tag is not None and tag.startswith("sha256:") else tag


def _text(parts: Sequence[Any]) -> str:
    """The whole text of a list of GenAI parts (or messages): text as it is, a tool call as
    ``name(arguments)``, a tool result as ``result <response>`` (not an arrow: a change is
    printed ``recorded → replayed``), other parts as JSON."""
    out: list[str] = []
    for part in parts:
        if isinstance(part, Mapping):
            if isinstance(part.get("content"), str):
                out.append(part["content"])
            elif isinstance(part.get("parts"), list):
                out.append(_text(part["parts"]))
            elif part.get("type") == "tool_call":
                out.append(f"{part.get('name')}({whole(part.get('arguments'))})")
            elif part.get("type") == "tool_call_response":
                out.append(f"result {whole(part.get('response'))}")
            else:
                out.append(whole(part))
        else:
            out.append(str(part))
    return " ".join(text for text in out if text)


def _message_field(index: int, *messages: Any) -> str:
    """``message N``, or ``system instructions (message N)`` for a system/developer message
    (Chat Completions keeps the system prompt among the messages)."""
    roles = {m.get("role") for m in messages if isinstance(m, Mapping)}
    if roles & {"system", "developer"}:
        return f"system instructions (message {index})"
    return f"message {index}"


def _message_line(message: Any) -> str:
    """A message as ``role: text``, whole."""
    role = message.get("role", "?") if isinstance(message, Mapping) else "?"
    return f"{role}: {_text([message])}"


def message_changes(old: list[Any], new: list[Any]) -> list[Change]:
    """``message N`` for each GenAI message that differs, aligned as lines are (one inserted
    or left out is ``added`` or ``removed``), each as ``role: text``."""
    keys_old = [canonical_json(m) for m in old]
    keys_new = [canonical_json(m) for m in new]
    changes: list[Change] = []
    matcher = difflib.SequenceMatcher(a=keys_old, b=keys_new, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        pairs = min(i2 - i1, j2 - j1) if op == "replace" else 0
        for k in range(pairs):
            a, b = old[i1 + k], new[j1 + k]
            field = _message_field(j1 + k, a, b)
            before, after = _message_line(a), _message_line(b)
            if before != after:
                changes.append(Change(field, "changed", before, after))
            else:  # what differs does not show as role: text (a tool call's id, a field)
                changes.extend(_paths_changes(field, a, b))
        for i in range(i1 + pairs, i2):
            changes.append(
                Change(_message_field(i, old[i]), "removed", _message_line(old[i]), None)
            )
        for j in range(j1 + pairs, j2):
            changes.append(Change(_message_field(j, new[j]), "added", None, _message_line(new[j])))
    return changes


def _paths_changes(field: str, old: Any, new: Any) -> list[Change]:
    """``field $.path`` for each JSON path where ``old`` and ``new`` differ."""
    return [
        change(f"{field} {path}", value_at(old, path), value_at(new, path))
        for path in json_paths_differing(old, new)
    ]


def _tool_name(tool: Any) -> str:
    if isinstance(tool, Mapping):
        name = tool.get("name")
        if isinstance(name, str):
            return name
    return preview(tool, 40)


def _tool_changes(old: list[Any], new: list[Any]) -> list[Change]:
    before = {_tool_name(t): t for t in old}
    after = {_tool_name(t): t for t in new}
    changes: list[Change] = []
    for name in sorted(before.keys() | after.keys()):
        a, b = before.get(name), after.get(name)
        if a is None:
            changes.append(change(f"tool {name}", None, b))
        elif b is None:
            changes.append(change(f"tool {name}", a, None))
        elif canonical_json(a) != canonical_json(b):
            # Each changed field of the definition, old and new (a description reworded,
            # a parameter added), rather than the new values alone.
            for path in json_paths_differing(a, b):
                changes.append(change(f"tool {name} {path}", value_at(a, path), value_at(b, path)))
    return changes


def value_at(value: Any, path: str) -> Any:
    """The value at a JSON path of :func:`json_paths_differing` (``$.a[2].b``,
    ``$["a.b"]``) in ``value``; None where the path does not lead."""
    current = value
    path = path.removeprefix("$")
    at = 0
    while at < len(path):
        step = _PATH_STEP.match(path, at)
        if step is None:
            return None
        at = step.end()
        key, index, quoted = step.groups()
        if index is not None:
            n = int(index)
            current = current[n] if _is_list(current) and n < len(current) else None
        else:
            name = key if key is not None else json.loads(quoted)
            current = current.get(name) if isinstance(current, Mapping) else None
    return current


def _http_changes(recorded: RecordedStep, new: Request, new_json: Any) -> list[Change]:
    changes: list[Change] = []
    if recorded.step.method.upper() != new.method.upper():
        changes.append(Change("method", "changed", recorded.step.method, new.method))
    if recorded.step.url:
        old_url, new_url = urlsplit(recorded.step.url), urlsplit(new.url)
        if old_url.path != new_url.path:
            changes.append(Change("path", "changed", old_url.path, new_url.path))
        if old_url.query != new_url.query:
            changes.append(change("query", old_url.query or None, new_url.query or None))
    old_body = recorded.request_body
    if old_body is None or old_body == new.body:
        return changes
    # A tool's or a value's request body is its arguments.
    label = "argument" if recorded.step.kind in ENVELOPE_KINDS else "body"
    old_json = without_trace_context(parse_json(old_body))
    new_json = without_trace_context(new_json)
    if old_json is not None and new_json is not None:
        for path in json_paths_differing(old_json, new_json):
            changes.append(
                change(f"{label} {path}", value_at(old_json, path), value_at(new_json, path))
            )
    else:
        changes.append(body_change("body", old_body, new.body))
    return changes


_CALL_PARTS = frozenset({"tool_call", "server_tool_call"})


def tool_call_ids(messages: Iterable[Any]) -> list[tuple[Any, str]]:
    """The tool calls of a model's answer (its GenAI output messages, as the codecs read
    them), in order: (the tool's name, the call's id)."""
    return [
        (part.get("name"), part["id"])
        for message in messages
        if isinstance(message, Mapping)
        for part in message.get("parts") or ()
        if isinstance(part, Mapping)
        and part.get("type") in _CALL_PARTS
        and isinstance(part.get("id"), str)
    ]


def _quoted(value: str) -> tuple[bytes, ...]:
    """``value`` as a JSON string, in the forms a client writes it."""
    return tuple({json.dumps(value).encode(), json.dumps(value, ensure_ascii=False).encode()})


class MintedIds:
    """The tool-call ids a fork's live answers minted in place of the recorded answers' ones
    (or run B's answers in place of run A's, for ``diff``).

    A provider names each tool call anew (``call_…``, ``toolu_…``): past the live point, the
    program echoes the live ids in every later request, where the recording has the
    recorded ones. Each live model answer is paired with the recorded answer of the step it
    stands for (:meth:`learn`: the n-th tool call of one with the n-th of the other, when
    they call the same tool), and a later request is compared with the live ids put back
    (:meth:`restore`). Only that renaming is set aside: an id used where the recording had
    another, a recorded id sent where the live answer minted a new one (:meth:`stale`), or
    any other difference still counts."""

    def __init__(self) -> None:
        self._back: dict[str, str] = {}  # live id -> recorded id
        self._ahead: dict[str, str] = {}  # recorded id -> live id
        self._lock = threading.Lock()
        mend_in_child(self)

    def learn(self, recorded: RecordedStep, live: Iterable[Any]) -> None:
        """Pair the tool calls of ``live`` (the output messages of the live answer to the
        call ``recorded`` stands for) with those of ``recorded``'s answer."""
        old = answer_messages(recorded)
        if not old:
            return
        with self._lock:
            for (old_name, old_id), (new_name, new_id) in zip(
                tool_call_ids(old), tool_call_ids(live), strict=False
            ):
                if old_name != new_name or old_id == new_id:
                    continue
                if old_id in self._ahead or new_id in self._back:
                    continue  # paired already: the first pairing stands
                self._ahead[old_id], self._back[new_id] = new_id, old_id

    def __bool__(self) -> bool:
        """Whether any id is paired."""
        return bool(self._back)

    def restore(self, body: bytes) -> bytes:
        """``body`` with each live id that stands in a JSON string of its own put back to
        the recorded id it replaced (``body`` itself when it holds none)."""
        if not self._back:
            return body
        with self._lock:
            pairs = list(self._back.items())
        for new_id, old_id in pairs:
            for quoted in _quoted(new_id):
                if quoted in body:
                    body = body.replace(quoted, json.dumps(old_id, ensure_ascii=False).encode())
        return body

    def restore_id(self, call_id: str | None) -> str | None:
        """The recorded id a live tool-call id replaced (``call_id`` itself otherwise)."""
        if call_id is None:
            return None
        return self._back.get(call_id, call_id)

    def stale(self, body: bytes) -> list[Change]:
        """A ``tool call id`` change for each recorded id ``body`` (as the program sent it)
        still uses where the live answer minted another: the live world never named it."""
        if not self._ahead:
            return []
        with self._lock:
            pairs = sorted(self._ahead.items())
        return [
            change("tool call id minted live", new_id, old_id)
            for old_id, new_id in pairs
            if any(quoted in body for quoted in _quoted(old_id))
        ]

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()
