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
import threading
import warnings

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
        compile_quietly(_python_spelling(pattern))
    except re.error as exc:
        return f"not a valid regular expression: {exc}"
    return None


@functools.lru_cache(maxsize=1024)
def python_pattern(pattern: str) -> re.Pattern[str] | regex.Pattern[str] | None:
    """``pattern`` compiled by ``re``, else by ``regex``, or ``None`` when
    neither reads it (ECMA's ``\\u{...}`` code points)."""
    spelled = _python_spelling(pattern)
    try:
        return compile_quietly(spelled)
    except re.error:
        pass
    try:
        # regex reads "[[:alpha:]]" as a POSIX class; re and ECMA 262 read a
        # "[" in a class as itself.
        return regex.compile(literal_class_brackets(spelled))
    except regex.error:
        return None


def compile_quietly(pattern: str) -> re.Pattern[str]:
    """``re.compile(pattern)`` without the FutureWarning ``re`` gives for a
    ``[``, ``--``, ``&&``, ``~~`` or ``||`` in a character class ("Possible
    nested set"): ``re`` reads them as the characters they are, as ECMA 262
    does; the warning is only about what a later Python might read. A
    schema's pattern is the user's, so no warning about it is printed.
    ``catch_warnings`` swaps the process's filters: a lock keeps two
    compiles (a server compiling tool sets on several threads) from
    restoring each other's."""
    with _QUIET_LOCK, warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return re.compile(pattern)


_QUIET_LOCK = threading.Lock()


def literal_class_brackets(pattern: str) -> str:
    """``pattern`` with each ``[`` inside a character class escaped, and a
    ``]`` that comes first in a class (``[]a]``, ``[^]a]``: a member, as
    ``re`` reads it): the same pattern for ``re``, and one that engines
    reading ``[`` in a class as a nested class or a POSIX class
    (``[[:alpha:]]``: Rust's regex, the ``regex`` module) read alike."""
    out: list[str] = []
    index, in_class = 0, False
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            out.append(pattern[index : index + 2])
            index += 2
            continue
        if not in_class and char == "[":
            in_class = True
            opening = "[^" if pattern.startswith("[^", index) else "["
            out.append(opening)
            index += len(opening)
            if pattern.startswith("]", index):
                out.append("\\]")
                index += 1
            continue
        if in_class and char == "]":
            in_class = False
        out.append("\\[" if in_class and char == "[" else char)
        index += 1
    return "".join(out)


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
