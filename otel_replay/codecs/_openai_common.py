"""Pure functions shared by the OpenAI Chat Completions and Responses codecs."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry.util.types import AttributeValue

from otel_replay.codecs._json import loads
from otel_replay.codecs._types import Part
from otel_replay.errors import CodecError

__all__ = [
    "API_TYPE",
    "CONVERSATION_ID",
    "FINISH_REASONS",
    "MAX_TOKENS",
    "OUTPUT_TYPE",
    "REQUEST_MODEL",
    "REQUEST_SERVICE_TIER",
    "REQUEST_STREAM",
    "RESPONSE_ID",
    "RESPONSE_MODEL",
    "RESPONSE_SERVICE_TIER",
    "SYSTEM_FINGERPRINT",
    "content_parts",
    "decode_json",
    "decode_str",
    "error_type_of",
    "function_tool",
    "generic_tool",
    "image_part",
    "looks_like_json_object",
    "model_from_path",
    "normalise_finish_reason",
    "output_type",
    "parse_arguments",
    "put_float",
    "put_int",
    "put_str",
    "strip_path",
    "usage_attributes",
]

# Attribute keys (OpenTelemetry GenAI semantic conventions and the OpenAI refinement).
REQUEST_MODEL = "gen_ai.request.model"
MAX_TOKENS = "gen_ai.request.max_tokens"
REQUEST_STREAM = "gen_ai.request.stream"
OUTPUT_TYPE = "gen_ai.output.type"
CONVERSATION_ID = "gen_ai.conversation.id"
RESPONSE_ID = "gen_ai.response.id"
RESPONSE_MODEL = "gen_ai.response.model"
FINISH_REASONS = "gen_ai.response.finish_reasons"
API_TYPE = "openai.api.type"
REQUEST_SERVICE_TIER = "openai.request.service_tier"
RESPONSE_SERVICE_TIER = "openai.response.service_tier"
SYSTEM_FINGERPRINT = "openai.response.system_fingerprint"

_INPUT_TOKENS = "gen_ai.usage.input_tokens"
_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"

# Token-detail fields of both usage objects, by the attribute they feed. OpenAI reports
# modality counts only on Chat Completions; the Responses usage has cache and reasoning.
_INPUT_DETAILS: tuple[tuple[str, str], ...] = (
    ("cached_tokens", "gen_ai.usage.cache_read.input_tokens"),
    ("cache_write_tokens", "gen_ai.usage.cache_creation.input_tokens"),
    ("text_tokens", "gen_ai.usage.text.input_tokens"),
    ("audio_tokens", "gen_ai.usage.audio.input_tokens"),
    ("image_tokens", "gen_ai.usage.image.input_tokens"),
)
_OUTPUT_DETAILS: tuple[tuple[str, str], ...] = (
    ("reasoning_tokens", "gen_ai.usage.reasoning.output_tokens"),
    ("text_tokens", "gen_ai.usage.text.output_tokens"),
    ("audio_tokens", "gen_ai.usage.audio.output_tokens"),
)

# Wire finish reasons -> the output-messages schema's FinishReason enum.
_FINISH_REASONS = {"tool_calls": "tool_call", "function_call": "tool_call"}

_AUDIO_MIME = {"wav": "audio/wav", "mp3": "audio/mpeg"}


def strip_path(path: str) -> str:
    """The URL path without query, fragment or trailing slash."""
    end = len(path)
    for sep in ("?", "#"):
        cut = path.find(sep)
        if 0 <= cut < end:
            end = cut
    return path[:end].rstrip("/")


def model_from_path(path: str) -> str | None:
    """The Azure deployment in ``.../deployments/{name}/...``, for bodies without a model."""
    segments = strip_path(path).split("/")
    for i, segment in enumerate(segments[:-1]):
        if segment == "deployments" and segments[i + 1]:
            return segments[i + 1]
    return None


def decode_json(body: bytes, what: str) -> Any:
    """One ``json.loads`` of a whole body, as :class:`CodecError` when it is not JSON."""
    try:
        return loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CodecError(f"{what} body is not JSON: {exc}") from None


def response_object(status: int, body: bytes, what: str) -> dict[str, Any] | None:
    """The JSON object of a non-streamed response body.

    None for an error status whose body is not the provider's JSON object (a proxy's HTML
    page); :class:`CodecError` for a success body that is not a JSON object.
    """
    if status >= 400:
        try:
            data = loads(body)
        except ValueError:
            return None
    else:
        data = decode_json(body, what)
    if isinstance(data, dict):
        return data
    if status >= 400:
        return None
    raise CodecError(f"{what} body is a JSON {type(data).__name__}, not an object")


# ``json.loads`` minus its type dispatch, for the many small strings of streams and arguments.
decode_str: Callable[[str], Any] = json.JSONDecoder().decode


def parse_arguments(arguments: Any) -> Any:
    """Tool-call arguments as parsed JSON when the string parses, else as they are."""
    if arguments.__class__ is not str:
        return arguments
    try:
        return decode_str(arguments)
    except ValueError:
        return arguments


def error_type_of(error: Any) -> str | None:
    """The provider's error ``code`` (or ``type`` when it has no code) of an error object.

    The conventions ask ``error.type`` to match the provider's error code; OpenAI leaves
    ``code`` null for some errors (``invalid_request_error``), where its ``type`` is used.
    """
    if not isinstance(error, dict):
        return None
    for key in ("code", "type"):
        value = error.get(key)
        if isinstance(value, str) and value:
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
    return None


def put_str(attrs: dict[str, AttributeValue], key: str, value: Any) -> None:
    """Set a string attribute when the wire value is a non-empty string."""
    if value.__class__ is str and value:
        attrs[key] = value


def put_int(attrs: dict[str, AttributeValue], key: str, value: Any) -> None:
    """Set an int attribute when the wire value is an integer (booleans are not)."""
    if value.__class__ is int:
        attrs[key] = value


def put_float(attrs: dict[str, AttributeValue], key: str, value: Any) -> None:
    """Set a double attribute (JSON ``1`` becomes ``1.0``, as the conventions type it)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        attrs[key] = float(value)


def output_type(format_type: Any) -> str | None:
    """``gen_ai.output.type`` for a ``response_format.type`` / ``text.format.type``."""
    if not isinstance(format_type, str) or not format_type:
        return None
    if format_type in ("json_object", "json_schema", "json"):
        return "json"
    return format_type


def normalise_finish_reason(reason: str) -> str:
    """A wire finish reason in the output-messages schema's vocabulary."""
    return _FINISH_REASONS.get(reason, reason)


def usage_attributes(
    attrs: dict[str, AttributeValue],
    usage: Any,
    *,
    input_key: str,
    output_key: str,
    input_details_key: str,
    output_details_key: str,
) -> None:
    """Copy the token counts of a Chat or Responses ``usage`` object into ``attrs``."""
    if type(usage) is not dict:
        return
    put_int(attrs, _INPUT_TOKENS, usage.get(input_key))
    put_int(attrs, _OUTPUT_TOKENS, usage.get(output_key))
    for details_key, fields in (
        (input_details_key, _INPUT_DETAILS),
        (output_details_key, _OUTPUT_DETAILS),
    ):
        details = usage.get(details_key)
        if type(details) is dict:
            for field, key in fields:
                value = details.get(field)
                if value.__class__ is int:  # not bool, not null
                    attrs[key] = value


def _modality(mime_type: str | None) -> str:
    if mime_type:
        major = mime_type.partition("/")[0]
        if major in ("image", "audio", "video"):
            return major
    return "document"


def _data_url_blob(url: str, modality: str | None) -> Part:
    header, _, data = url[5:].partition(",")
    mime_type = header.partition(";")[0] or None
    part: Part = {"type": "blob", "modality": modality or _modality(mime_type)}
    if mime_type:
        part["mime_type"] = mime_type
    part["content"] = data
    return part


def image_part(url: Any) -> Part:
    """An image given by URL: a ``blob`` for ``data:`` URLs, else a ``uri`` part."""
    if isinstance(url, str) and url.startswith("data:"):
        return _data_url_blob(url, "image")
    return {"type": "uri", "modality": "image", "uri": url}


def _file_data_part(data: Any, filename: Any) -> Part:
    if isinstance(data, str) and data.startswith("data:"):
        return _data_url_blob(data, None)
    part: Part = {"type": "blob", "modality": "document", "content": data}
    if isinstance(filename, str) and filename.lower().endswith(".pdf"):
        part["mime_type"] = "application/pdf"
    return part


def _audio_part(audio: Any) -> Part:
    if not isinstance(audio, dict):
        return {"type": "blob", "modality": "audio", "content": audio}
    part: Part = {"type": "blob", "modality": "audio", "content": audio.get("data")}
    mime_type = _AUDIO_MIME.get(audio.get("format") or "")
    if mime_type:
        part["mime_type"] = mime_type
    return part


def _chat_file_part(file: Any) -> Part:
    if not isinstance(file, dict):
        return {"type": "file", "file": file}
    if file.get("file_data") is not None:
        return _file_data_part(file.get("file_data"), file.get("filename"))
    return {"type": "file", "modality": "document", "file_id": file.get("file_id")}


def _input_image_part(part: Mapping[str, Any]) -> Part:
    url = part.get("image_url")
    if url is not None:
        return image_part(url)
    return {"type": "file", "modality": "image", "file_id": part.get("file_id")}


def _input_file_part(part: Mapping[str, Any]) -> Part:
    if part.get("file_data") is not None:
        return _file_data_part(part.get("file_data"), part.get("filename"))
    if part.get("file_url") is not None:
        return {"type": "uri", "modality": "document", "uri": part.get("file_url")}
    return {"type": "file", "modality": "document", "file_id": part.get("file_id")}


def _content_part(part: Any) -> Part:
    """One wire content part (Chat or Responses vocabulary) in the GenAI part shape."""
    if isinstance(part, str):
        return {"type": "text", "content": part}
    if not isinstance(part, dict):
        return {"type": type(part).__name__, "value": part}
    kind = part.get("type")
    if kind in ("text", "input_text", "output_text"):
        return {"type": "text", "content": part.get("text")}
    if kind == "refusal":
        return {"type": "refusal", "content": part.get("refusal")}
    if kind == "image_url":
        image = part.get("image_url")
        return image_part(image.get("url") if isinstance(image, dict) else image)
    if kind == "input_image":
        return _input_image_part(part)
    if kind == "input_audio":
        return _audio_part(part.get("input_audio"))
    if kind == "file":
        return _chat_file_part(part.get("file"))
    if kind == "input_file":
        return _input_file_part(part)
    if kind in ("reasoning_text", "summary_text"):
        return {"type": "reasoning", "content": part.get("text")}
    generic = dict(part)
    if not isinstance(kind, str):
        generic["type"] = "unknown"
    return generic


def content_parts(content: Any) -> list[Part]:
    """Wire message content (a string, a list of parts, or null) as GenAI parts."""
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    if isinstance(content, list):
        return [_content_part(part) for part in content]
    if content is None:
        return []
    return [_content_part(content)]


def function_tool(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A function tool definition in the GenAI shape, from its flat wire fields.

    ``description`` and ``parameters`` appear only when the wire has them (a wire ``null``
    stays ``null``), following the tool-definitions schema.
    """
    tool: dict[str, Any] = {"type": "function", "name": spec.get("name")}
    if "description" in spec:
        tool["description"] = spec["description"]
    if "parameters" in spec:
        tool["parameters"] = spec["parameters"]
    return tool


# Keys of provider-side tool definitions (MCP) that carry credentials; never recorded.
_SECRET_TOOL_KEYS = frozenset({"headers", "authorization"})


def generic_tool(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A non-function tool definition kept as its wire fields (credentials dropped).

    The tool-definitions schema requires a ``name``; a built-in tool without one (for
    example ``{"type": "web_search"}``) is named after its type.
    """
    tool = {key: value for key, value in spec.items() if key not in _SECRET_TOOL_KEYS}
    if not isinstance(tool.get("name"), str):
        tool["name"] = tool.get("type")
    return tool


def looks_like_json_object(body: bytes) -> bool:
    """True when a body starts (after whitespace) with ``{``: JSON rather than SSE."""
    return body[:64].lstrip()[:1] == b"{"
