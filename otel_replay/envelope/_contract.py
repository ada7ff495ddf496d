"""A tool's contract: the JSON Schemas of its arguments and result, their checks, and its
``replay.tool.schema.version``."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from otel_replay._canonical import canonical_json, parse_json, sha256_tag
from otel_replay._schema import SchemaCheck, check_schema
from otel_replay.errors import ConfigError, ToolContractError

__all__ = ["Contract", "bound_arguments", "contract_for", "schema_version"]

_RECEIVERS = ("self", "cls")


@dataclass(frozen=True, slots=True)
class Contract:
    """What a tool promises, and the validators that hold it to it."""

    name: str
    description: str | None
    input_schema: Mapping[str, Any]
    output_schema: Mapping[str, Any] | None
    version: str
    return_annotation: Any
    signature: inspect.Signature
    _input: SchemaCheck
    _output: SchemaCheck | None

    def check_arguments(self, arguments: bytes) -> None:
        """Raise ToolContractError (``invalid_arguments``) when the canonical JSON
        ``arguments`` break the input schema."""
        _check(self._input, arguments, self.name, "invalid_arguments")

    def check_result(self, result: bytes) -> None:
        """Raise ToolContractError (``invalid_result``) when the canonical JSON ``result``
        breaks the output schema (no check without one)."""
        if self._output is not None:
            _check(self._output, result, self.name, "invalid_result")

    def definition(self) -> dict[str, Any]:
        """The tool as a model is told of it (the GenAI ``function`` tool definition)."""
        definition: dict[str, Any] = {"name": self.name, "parameters": dict(self.input_schema)}
        if self.description:
            definition["description"] = self.description
        return definition


def schema_version(
    name: str,
    description: str | None,
    input_schema: Mapping[str, Any] | None,
    output_schema: Mapping[str, Any] | None,
) -> str:
    """``replay.tool.schema.version`` of a tool (ours or a framework's): the sha256 of the
    canonical JSON of what a model is told of it and what it returns."""
    return sha256_tag(
        canonical_json(
            {
                "name": name,
                "description": description,
                "input_schema": input_schema,
                "output_schema": output_schema,
            }
        )
    )


def contract_for(
    fn: Callable[..., Any],
    name: str,
    description: str | None,
    input_schema: Mapping[str, Any] | None,
    output_schema: Mapping[str, Any] | None,
) -> Contract:
    """The contract of ``fn``; raises ConfigError naming the tool when a given schema is not a
    valid JSON Schema."""
    hints = _hints(fn)
    parameters = _parameters(fn)
    if input_schema is None:
        input_schema = _input_schema(name, parameters, hints)
    returns = hints.get("return", inspect.Signature.empty)
    if output_schema is None and returns is not inspect.Signature.empty:
        output_schema = _type_schema(returns)
    version = schema_version(name, description, input_schema, output_schema)
    return Contract(
        name=name,
        description=description,
        input_schema=input_schema,
        output_schema=output_schema,
        version=version,
        return_annotation=None if returns is inspect.Signature.empty else returns,
        signature=inspect.signature(fn),
        _input=_validator(input_schema, name, "input_schema"),
        _output=None if output_schema is None else _validator(output_schema, name, "output_schema"),
    )


def bound_arguments(
    signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, Any]:
    """The call's arguments by parameter name, defaults applied, the receiver of a method
    left out: what is recorded, hashed and checked. Raises TypeError as the call itself
    would when they do not fit ``signature``."""
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    arguments = dict(bound.arguments)
    first = next(iter(signature.parameters), None)
    if first in _RECEIVERS:
        arguments.pop(first, None)
    return arguments


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn, include_extras=True)
    except Exception:  # unresolvable forward references: use the raw ones
        return dict(getattr(fn, "__annotations__", {}))


def _parameters(fn: Callable[..., Any]) -> list[inspect.Parameter]:
    parameters = list(inspect.signature(fn).parameters.values())
    if parameters and parameters[0].name in _RECEIVERS:
        parameters = parameters[1:]
    return parameters


def _input_schema(
    name: str, parameters: list[inspect.Parameter], hints: Mapping[str, Any]
) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    required: list[str] = []
    for parameter in parameters:
        hint = hints.get(parameter.name, Any)
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            schema: dict[str, Any] = {"type": "array", "items": _type_schema(hint)}
        elif parameter.kind is inspect.Parameter.VAR_KEYWORD:
            schema = {"type": "object", "additionalProperties": _type_schema(hint)}
        else:
            schema = _type_schema(hint)
            if parameter.default is inspect.Parameter.empty:
                required.append(parameter.name)
        properties[parameter.name] = schema
    schema = {"type": "object", "properties": properties, "required": required}
    return _hoist_defs(schema)


def _type_schema(hint: Any) -> dict[str, Any]:
    """The JSON Schema pydantic gives ``hint`` ({} when it cannot describe it)."""
    if hint is Any:
        return {}
    from pydantic import TypeAdapter  # noqa: PLC0415 - first use only

    try:
        schema: dict[str, Any] = TypeAdapter(hint).json_schema()
    except Exception:  # a type pydantic cannot describe: unconstrained
        return {}
    return schema


def _hoist_defs(schema: dict[str, Any]) -> dict[str, Any]:
    """Move each property's ``$defs`` to the top, where their ``$ref``s point."""
    defs: dict[str, Any] = {}
    for value in schema["properties"].values():
        for part in (value, value.get("items"), value.get("additionalProperties")):
            if isinstance(part, dict):
                defs.update(part.pop("$defs", {}))
    if defs:
        schema["$defs"] = defs
    return schema


def _validator(schema: Mapping[str, Any], tool: str, which: str) -> SchemaCheck:
    import jsonschema  # noqa: PLC0415 - first use only

    try:
        check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ConfigError(
            f"tool {tool!r}: {which} is not a valid JSON Schema: {exc.message}"
        ) from None
    return SchemaCheck(schema)


def _check(validator: SchemaCheck, data: bytes, tool: str, code: str) -> None:
    error = validator.first_error(parse_json(data))
    if error is not None:
        raise ToolContractError(tool, code, error.json_path, error.message)
