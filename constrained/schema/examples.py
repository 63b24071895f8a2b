"""A plain example value for a JSON Schema: every property filled, short text.

The compiler writes one call of each tool with such arguments through a
fresh grammar before the first request (:meth:`CompiledTools.matcher`), so
llguidance builds the lexer states real calls pass through. The value need
not be valid: where the grammar refuses it, the walk stops there.
"""

from __future__ import annotations

from typing import Any

FORMAT_EXAMPLES = {
    "date-time": "2024-05-01T12:30:00Z",
    "date": "2024-05-01",
    "time": "12:30:00Z",
    "uuid": "123e4567-e89b-12d3-a456-426614174000",
    "email": "someone@example.com",
    "uri": "https://example.com/page",
    "ipv4": "192.0.2.1",
    "ipv6": "2001:db8::1",
    "hostname": "example.com",
}
"""A value of each string format the constraint enforces."""

_DEPTH = 6
_VALUES = 256
"""Values an example holds at most (schemas that share definitions many
levels deep would otherwise write exponentially many)."""


def example_value(schema: Any, defs: dict[str, Any] | None = None) -> Any:
    """An example for ``schema``: ``enum``/``const`` first, the first branch
    of ``anyOf``/``oneOf``, a local ``$ref`` into ``defs`` (default: the
    schema's ``$defs``), the minimum of a number, one item of an array, an
    example of a string format, else a short text; ``None`` past a depth of
    six, past 256 values, or for what it cannot read."""
    if defs is None:
        defs = schema.get("$defs", {}) if isinstance(schema, dict) else {}
    return _Examples(defs).value(schema, 0)


class _Examples:
    def __init__(self, defs: dict[str, Any]) -> None:
        self.defs = defs
        self.left = _VALUES

    def value(self, schema: Any, depth: int) -> Any:
        self.left -= 1
        if not isinstance(schema, dict) or depth > _DEPTH or self.left < 0:
            return None
        if "$ref" in schema:
            return self.value(self.defs.get(str(schema["$ref"]).rsplit("/", 1)[-1], {}), depth + 1)
        for key in ("anyOf", "oneOf"):
            if isinstance(schema.get(key), list) and schema[key]:
                return self.value(schema[key][0], depth + 1)
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            return schema["enum"][0]
        if "const" in schema:
            return schema["const"]
        kind = schema.get("type")
        kind = kind[0] if isinstance(kind, list) and kind else kind
        if kind == "object" or isinstance(schema.get("properties"), dict):
            return {key: self.value(value, depth + 1) for key, value in schema.get("properties", {}).items()}
        if kind == "array":
            count = schema.get("minItems", 1)
            return [self.value(schema.get("items", {}), depth + 1)] * max(count if isinstance(count, int) else 1, 1)
        if kind in ("integer", "number"):
            return schema.get("minimum", schema.get("default", 3))
        if kind == "boolean":
            return True
        if kind == "null":
            return None
        if schema.get("format") in FORMAT_EXAMPLES:
            return FORMAT_EXAMPLES[schema["format"]]
        return schema["default"] if isinstance(schema.get("default"), str) else "example text"
