"""JSON Schema patterns (ECMA 262 regular expressions) read in Python.

The normalizer refuses a pattern that is not a regular expression, or that
uses Python-only syntax ECMA 262 lacks (possessive quantifiers, atomic
groups); the normalizer's checks and the parser's validation match with
:func:`python_pattern`: Python's ``re`` where it reads the pattern (as
``jsonschema`` would), else the ``regex`` module, which reads the ECMA
syntax ``re`` lacks (``\\p{L}``, ``(?<name>...)``, variable-width
look-behind). ``\\k<name>`` is spelled ``(?P=name)`` for both.
"""

from __future__ import annotations

import functools
import re

import regex

_NAMED_GROUP = re.compile(r"(?<!\\)\(\?<(?![=!])")
_NAMED_BACKREFERENCE = re.compile(r"\\k<([A-Za-z_][A-Za-z0-9_]*)>")
_NO_PYTHON_FORM = re.compile(r"\\u\{")
_COUNTED = re.compile(r"\{[0-9]+(,[0-9]*)?\}")


def pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` is not an ECMA 262 regular expression, or ``None``."""
    python_only = _python_only_syntax(pattern)
    if python_only is not None:
        return f"{python_only} is Python regex syntax, not ECMA 262 (JSON Schema's pattern syntax); rewrite the pattern without it"
    if _NO_PYTHON_FORM.search(pattern) or python_pattern(pattern) is not None:
        return None
    try:
        re.compile(_python_spelling(pattern))
    except re.error as exc:
        return f"not a valid regular expression: {exc}"
    return None


@functools.lru_cache(maxsize=1024)
def python_pattern(pattern: str) -> re.Pattern[str] | regex.Pattern[str] | None:
    """``pattern`` compiled by ``re``, else by ``regex``, or ``None`` when
    neither reads it (ECMA's ``\\u{...}`` code points)."""
    spelled = _python_spelling(pattern)
    try:
        return re.compile(spelled)
    except re.error:
        pass
    try:
        return regex.compile(spelled)
    except regex.error:
        return None


def _python_spelling(pattern: str) -> str:
    """ECMA's named groups and named back-references as ``re`` writes them."""
    return _NAMED_BACKREFERENCE.sub(r"(?P=\1)", _NAMED_GROUP.sub("(?P<", pattern))


def _python_only_syntax(pattern: str) -> str | None:
    """The first possessive quantifier or atomic group outside escapes and
    character classes, described, or ``None``."""
    index, in_class, quantifier_at = 0, False, None
    while index < len(pattern):
        char, start = pattern[index], index
        quantifier = False
        if char == "\\":
            index += 1
        elif in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif pattern.startswith("(?>", index):
            return f"the atomic group at offset {index}"
        elif char == "+" and quantifier_at is not None:
            return f"the possessive quantifier at offset {quantifier_at}"
        elif char == "{" and (counted := _COUNTED.match(pattern, index)):
            index = counted.end() - 1
            quantifier = True
        else:
            quantifier = char in "*+?" and not (index and pattern[index - 1] == "(")
        quantifier_at = start if quantifier else None
        index += 1
    return None
