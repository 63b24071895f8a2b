"""Limits that keep reading a schema bounded in time, memory and stack.

Reading, compiling and validating a schema recurse through it, so a schema
nested deeper than Python's recursion limit allows, or one whose references
expand without end, is refused with :class:`SchemaLimitError` naming the
limit and the place, before anything recursive reaches it.
"""

from __future__ import annotations

import sys
from typing import Any

from ..errors import SchemaLimitError
from .refs import pointer_token

MAX_NESTING = 256
"""How deep objects and arrays may nest in a tool's parameters document (the
root object is level 1): 128 levels of objects in objects fit."""

MAX_DEPTH = 128
"""How deep values may nest in what a schema describes (the arguments object
is level 1), and how long a chain of ``$ref``/``allOf``/``anyOf``/``oneOf``
may be between two values. A recursive ``$ref`` is not limited: it is read
once and refers to itself."""

MAX_PROPERTIES = 1_000
"""How many keys one object may declare: the grammar chains a rule per key,
and llguidance overflows its stack past about 1,800 of them."""

MAX_EXPANSION = 20_000
"""How many subschemas reading one value's schema may visit through
``$ref``/``allOf``/``anyOf``/``oneOf``: a definition referenced several
times at every level of a nest would otherwise expand exponentially."""


def too_deep(tool: str) -> SchemaLimitError:
    """The error for a schema whose shape exhausted Python's recursion limit
    within the limits above (a caller far down the stack, unions on every
    level)."""
    return SchemaLimitError(
        f"the schema nests too deep to read within Python's recursion limit ({sys.getrecursionlimit()}); "
        "flatten the schema",
        tool=tool,
    )


def check_nesting(document: Any, tool: str | None) -> None:
    """Raise :class:`SchemaLimitError` at the first object or array nested
    deeper than :data:`MAX_NESTING` (walked with a stack, so a document of
    any depth is reported, not a RecursionError)."""
    stack: list[tuple[Any, str, int]] = [(document, "", 1)]
    while stack:
        value, pointer, depth = stack.pop()
        if depth > MAX_NESTING:
            raise SchemaLimitError(
                f"objects and arrays nest more than {MAX_NESTING} levels deep here; "
                "flatten the schema (a recursive $ref is not limited)",
                tool=tool,
                path=pointer,
            )
        items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        for key, child in items:
            if isinstance(child, (dict, list)):
                stack.append((child, f"{pointer}/{pointer_token(str(key))}", depth + 1))
