"""JSON Schema checks done twice over: jsonschema-rs (compiled) says whether an instance
holds, jsonschema (the reference) says why it does not.

The reference has the last word: an instance the fast validator refuses, or cannot read (a
lone surrogate: Rust strings cannot hold one), is judged by the reference alone, so what is
accepted and every error message are the reference's."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import jsonschema

__all__ = ["SchemaCheck"]


@dataclass(frozen=True, slots=True)
class SchemaCheck:
    """One schema's validators; build it once per schema (compiling costs more than a check)."""

    fast: Any
    """jsonschema-rs' validator; None for a schema it cannot compile."""
    reference: jsonschema.protocols.Validator

    @classmethod
    def of(cls, schema: Mapping[str, Any]) -> SchemaCheck:
        """The checks of ``schema`` (its ``$schema`` dialect, Draft 2020-12 if it names
        none); ``jsonschema.SchemaError`` if it is not a valid schema."""
        import jsonschema  # noqa: PLC0415 - first use only
        import jsonschema_rs  # noqa: PLC0415 - first use only

        reference = jsonschema.validators.validator_for(
            schema, default=jsonschema.Draft202012Validator
        )
        reference.check_schema(dict(schema))
        try:
            fast = jsonschema_rs.validator_for(dict(schema))
        except Exception:  # a schema it cannot compile: the reference decides alone
            fast = None
        return cls(fast, reference(dict(schema)))

    def first_error(self, instance: Any) -> jsonschema.ValidationError | None:
        """The most relevant error of ``instance`` (jsonschema's ``best_match``); None if it
        holds."""
        try:
            if self.fast is not None and self.fast.is_valid(instance):
                return None
        except ValueError:  # a lone surrogate: the reference decides
            pass
        import jsonschema  # noqa: PLC0415 - first use only

        error: jsonschema.ValidationError | None = jsonschema.exceptions.best_match(
            self.reference.iter_errors(instance)
        )
        return error
