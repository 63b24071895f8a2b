"""JSON Schema ``pattern`` (ECMA 262) -> the Rust regex syntax llguidance reads.

Only what translates exactly is translated; anything else (look-around,
back-references, named groups, Unicode property classes) returns ``None`` and
the caller relaxes the constraint with a warning.
"""

from __future__ import annotations

import re

from ..schema.patterns import compile_quietly, literal_class_brackets

_CLASS_ESCAPES = {
    "d": "[0-9]",
    "D": "[^0-9]",
    "w": "[0-9A-Za-z_]",
    "W": "[^0-9A-Za-z_]",
    "s": r"[\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]",
    "S": r"[^\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]",
}
_IN_CLASS = {"d": "0-9", "w": "0-9A-Za-z_", "s": r"\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"}
_UNSUPPORTED = re.compile(r"\(\?[=!<]|\\[1-9]|\\k<|\\[pP]\{|\(\?<")


def ecma_to_rust(pattern: str) -> str | None:
    """An unanchored-search ECMA pattern as a whole-string Rust regex, or
    ``None`` when it uses constructs without an exact translation."""
    if _UNSUPPORTED.search(pattern):
        return None
    body = _translate_escapes(literal_class_brackets(pattern))
    if body is None:
        return None
    anchored_start = body.startswith("^")
    anchored_end = body.endswith("$") and not body.endswith("\\$")
    if anchored_start:
        body = body[1:]
    if anchored_end:
        body = body[:-1]
    if "^" in body.replace("[^", "").replace("\\^", "") or _has_inner_dollar(body):
        return None
    inner = f"(?:{body})"
    if not anchored_start:
        inner = "(?s:.*)" + inner
    if not anchored_end:
        inner = inner + "(?s:.*)"
    try:
        compile_quietly(inner)
    except re.error:
        return None
    return inner


def _has_inner_dollar(body: str) -> bool:
    escaped = False
    for char in body:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "$":
            return True
    return False


def _translate_escapes(pattern: str) -> str | None:
    """ECMA's ``\\d``, ``\\w``, ``\\s`` are ASCII/fixed sets; Rust's are
    Unicode-aware, so they are spelled out. In a class (whose ``[`` members
    :func:`literal_class_brackets` escaped), ``&`` and ``~`` are escaped:
    Rust's set operations ``&&`` and ``~~`` are characters in ECMA 262."""
    out: list[str] = []
    in_class = False
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\" and index + 1 < len(pattern):
            nxt = pattern[index + 1]
            if in_class and nxt in _IN_CLASS:
                out.append(_IN_CLASS[nxt])
            elif in_class and nxt in "DWS":
                return None
            elif not in_class and nxt in _CLASS_ESCAPES:
                out.append(_CLASS_ESCAPES[nxt])
            elif nxt == "/":
                out.append("/")
            else:
                out.append(char + nxt)
            index += 2
            continue
        if char == "[" and not in_class:
            in_class = True
        elif char == "]" and in_class:
            in_class = False
        elif in_class and char in "&~":
            # Rust reads "&&" and "~~" in a class as set operations.
            out.append("\\" + char)
            index += 1
            continue
        elif in_class and pattern.startswith("--", index):
            # A set difference in Rust; which dash is a range's, ECMA decides
            # by the members around it.
            return None
        elif char == "." and not in_class:
            # ECMA's dot excludes line terminators.
            out.append(r"[^\n\r\u2028\u2029]")
            index += 1
            continue
        out.append(char)
        index += 1
    return "".join(out)


def without_text(*texts: str) -> str:
    """A whole-string regex of the strings that contain none of ``texts``,
    without look-around (it serves as a JSON Schema ``pattern``).

    Written as runs between occurrences of the texts' first character (one
    for all): each such occurrence may be followed by a prefix that some
    text's rest goes on from (never a whole rest) and then any character
    that none of them goes on with there. That is exact when the first
    character does not occur again in any text (no failed partial match can
    hide the start of another), which is required.
    """
    first = texts[0][:1] if texts and texts[0] else ""
    rests = [text[1:] for text in texts]
    if not first or any(text[:1] != first or first in text[1:] for text in texts):
        raise ValueError(f"{texts!r} must be non-empty, start alike and not repeat their first character")
    head = _class_escape(first)
    prefixes = dict.fromkeys(rest[:k] for rest in rests for k in range(len(rest)) if rest[:k] not in rests)

    def breaking(prefix: str) -> str:
        # After the first character and ``prefix``: the end, or a character no text goes on with.
        going_on = sorted({_class_escape(r[len(prefix)]) for r in rests if len(r) > len(prefix) and r.startswith(prefix)})
        return f"{escape(prefix)}(?:[^{''.join(going_on)}{head}][^{head}]*)?"

    breaks = "|".join(map(breaking, prefixes))
    return f"^(?:[^{head}]*(?:{escape(first)}(?:{breaks}))*)$"


def escape(text: str) -> str:
    """``text`` as a regex that matches it literally (llguidance's syntax)."""
    return "".join("\\" + char if char in r"\.+*?()|[]{}^$" else char for char in text)


def _class_escape(char: str) -> str:
    return "\\" + char if char in r"\]^-[&~" else char
