"""JSON Schema checks done twice over: jsonschema-rs (compiled) says whether an instance
holds, jsonschema (the reference) says why it does not.

The reference has the last word: an instance the fast validator refuses, or cannot read (a
lone surrogate: Rust strings cannot hold one), is judged by the reference alone, so what is
accepted and every error message are the reference's. The reference is built (and
jsonschema imported) the first time it is needed: a process whose instances all hold never
pays for it."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import jsonschema

__all__ = ["SchemaCheck", "check_schema"]


def check_schema(schema: Mapping[str, Any]) -> None:
    """Raise ``jsonschema.SchemaError`` when ``schema`` is not a valid schema of its
    ``$schema`` dialect (Draft 2020-12 if it names none)."""
    _reference_class(schema).check_schema(dict(schema))


def _reference_class(schema: Mapping[str, Any]) -> type[jsonschema.protocols.Validator]:
    import jsonschema  # noqa: PLC0415 - first use only

    return jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)


class SchemaCheck:
    """One valid schema's validators; build it once per schema (compiling costs more than a
    check)."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        import jsonschema_rs  # noqa: PLC0415 - first use only

        self._schema = dict(schema)
        try:
            self._fast: Any = jsonschema_rs.validator_for(self._schema)
        except Exception:  # a schema it cannot compile: the reference decides alone
            self._fast = None
        self._reference: jsonschema.protocols.Validator | None = None
        self._lock = threading.Lock()

    def first_error(self, instance: Any) -> jsonschema.ValidationError | None:
        """The most relevant error of ``instance`` (jsonschema's ``best_match``); None if it
        holds."""
        try:
            if self._fast is not None and self._fast.is_valid(instance):
                return None
        except ValueError:  # a lone surrogate: the reference decides
            pass
        import jsonschema  # noqa: PLC0415 - first use only

        error: jsonschema.ValidationError | None = jsonschema.exceptions.best_match(
            self._reference_validator().iter_errors(instance)
        )
        return error

    def _reference_validator(self) -> jsonschema.protocols.Validator:
        with self._lock:
            if self._reference is None:
                self._reference = _reference_class(self._schema)(self._schema)
            return self._reference
