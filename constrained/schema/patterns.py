"""JSON Schema patterns (ECMA 262 regular expressions) read in Python.

The normalizer refuses a pattern that is not a regular expression, or that
uses Python-only syntax ECMA 262 lacks (possessive quantifiers, atomic
groups); the normalizer's checks and the parser's validation read patterns
as :func:`python_pattern` does: Python's ``re`` where it reads the pattern
(as ``jsonschema`` would), else the ``regex`` module, which reads the ECMA
syntax ``re`` lacks (``\\p{L}``, ``(?<name>...)``, variable-width
look-behind). ``\\k<name>`` is spelled ``(?P=name)`` for both.

Matching (:func:`pattern_matcher`) keeps those verdicts without letting a
client's pattern freeze the server (``^(a+)+$`` against 25 ``a`` and a
``!`` took a second, doubling with each ``a``): a pattern ``re`` reads is
rewritten from ``re``'s own parse for RE2, which runs in linear time, with
every character class spelled out as the code points ``re`` matches
(``\\d``, ``\\w``, ``\\s`` and case-insensitive letters are Unicode
in ``re`` and differ in RE2). What RE2 cannot say (look-around,
back-references, ``\\b``, ``$`` before the end) and the patterns only
the ``regex`` module reads run there, bounded by :data:`MATCH_TIMEOUT_S`.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import re
import threading
import warnings
from collections.abc import Iterator
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

import re2
import regex

from ..caches import cached

logger = logging.getLogger(__name__)

MATCH_TIMEOUT_S = 0.1
"""How long a pattern RE2 cannot run may take on one value (the ``regex``
module's backtracking) before the value is taken to match, as a pattern no
engine reads is."""

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


@cached(1024)
def python_pattern(pattern: str) -> re.Pattern[str] | regex.Pattern[str] | None:
    """``pattern`` compiled by ``re``, else by ``regex``, or ``None`` when
    neither reads it (ECMA's ``\\u{...}`` code points)."""
    spelled = _python_spelling(pattern)
    try:
        return compile_quietly(spelled)
    except re.error:
        return _regex_reading(spelled)


class PatternMatcher:
    """How one pattern is matched: by RE2 where it says exactly what ``re``
    reads, else by the ``regex`` module within :data:`MATCH_TIMEOUT_S`
    (a value it takes longer on is taken to match, with a warning), else
    (no engine reads the pattern) every value matches."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        reading = python_pattern(pattern)
        # re's parse, or None with the regex module's reading (None: no engine reads it).
        self._tree = _python_tree(_python_spelling(pattern)) if isinstance(reading, re.Pattern) else None
        self._regex_reading = None if isinstance(reading, re.Pattern) else reading
        # The RE2 program, or None where RE2 cannot say the pattern.
        self.linear: Any = None if self._tree is None else _re2_engine(self._tree)

    @functools.cached_property
    def backtracking(self) -> regex.Pattern[str] | None:
        """The ``regex`` module's program: ``re``'s parse written out for it
        (so ``\\d`` keeps ``re``'s Unicode tables), or, for a pattern ``re``
        cannot read, the ``regex`` module's own reading. Built when first
        needed: RE2 reads every value but one holding a lone surrogate,
        which is no UTF-8."""
        if self._tree is None:
            return self._regex_reading
        return _regex_engine(self._tree) or _regex_reading(_python_spelling(self.pattern))

    def matches(self, text: str) -> bool:
        """Whether the pattern matches somewhere in ``text`` (unanchored)."""
        if self.linear is not None:
            try:
                return self.linear.search(text) is not None
            except UnicodeEncodeError:
                pass
        engine = self.backtracking
        if engine is None:
            return True
        try:
            return engine.search(text, timeout=MATCH_TIMEOUT_S) is not None
        except TimeoutError:
            logger.warning(
                "pattern %r took over %s s on a value of %d characters; the value is taken to match",
                self.pattern,
                MATCH_TIMEOUT_S,
                len(text),
            )
            return True


@cached(1024)
def pattern_matcher(pattern: str) -> PatternMatcher:
    """The :class:`PatternMatcher` of ``pattern`` (built once: writing a
    pattern out for RE2 costs more than matching it)."""
    return PatternMatcher(pattern)


def _regex_reading(spelled: str) -> regex.Pattern[str] | None:
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
    with _quiet():
        return re.compile(pattern)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    with _QUIET_LOCK, warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        yield


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


# -- re's parse written out for RE2 and for the regex module -------------------

Ranges = tuple[tuple[int, int], ...]
"""Code points as sorted, disjoint, inclusive ranges."""

_LAST = 0x10FFFF
_EVERYTHING: Ranges = ((0, _LAST),)
_SURROGATES = (0xD800, 0xDFFF)
_RE2_MAX_COUNT = 1000
_TYPE_FLAGS = sre.SRE_FLAG_ASCII | sre.SRE_FLAG_LOCALE | sre.SRE_FLAG_UNICODE
_CHARACTER_FLAGS = sre.SRE_FLAG_IGNORECASE | sre.SRE_FLAG_ASCII | sre.SRE_FLAG_DOTALL
_CATEGORIES = {
    sre.CATEGORY_DIGIT: r"\d",
    sre.CATEGORY_NOT_DIGIT: r"\D",
    sre.CATEGORY_SPACE: r"\s",
    sre.CATEGORY_NOT_SPACE: r"\S",
    sre.CATEGORY_WORD: r"\w",
    sre.CATEGORY_NOT_WORD: r"\W",
}
_NON_BOUNDARY_IN_EMPTY = re.search(r"\B", "") is not None
"""Whether ``re``'s ``\\B`` matches in the empty string (not before Python 3.14)."""

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a pattern RE2 refuses goes to the regex module, not to stderr


class _Untranslatable(Exception):
    """A construct the target engine cannot say with ``re``'s meaning."""


def _python_tree(spelled: str) -> Any:
    """``re``'s parse of a pattern ``re`` reads (its warnings hidden, as
    :func:`compile_quietly` hides them)."""
    with _quiet():
        return sre_parse.parse(spelled)


def _re2_engine(tree: Any) -> Any:
    try:
        return re2.compile(_Writer(linear=True).pattern(tree), _RE2_OPTIONS)
    except (_Untranslatable, re2.error):
        return None


def _regex_engine(tree: Any) -> regex.Pattern[str] | None:
    try:
        return regex.compile(_Writer(linear=False).pattern(tree))
    except (_Untranslatable, regex.error):
        return None


class _Writer:
    """``re``'s parse of a pattern written out for RE2 (``linear``) or the
    ``regex`` module, meaning what ``re`` means: each character class as
    the code points ``re`` matches, anchors by ``re``'s definitions, groups
    numbered as ``re`` numbers them. Raises :class:`_Untranslatable` where
    the engine cannot say it (RE2: look-around, back-references, ``\\b``,
    a ``$`` something follows)."""

    def __init__(self, *, linear: bool) -> None:
        self.linear = linear

    def pattern(self, tree: Any) -> str:
        return self.sequence(tree, tree.state.flags, tail=True)

    def sequence(self, items: Any, flags: int, tail: bool) -> str:
        """``items`` one after another; ``tail``: nothing follows the last."""
        items = list(items)
        return "".join(self.item(op, av, flags, tail and at == len(items) - 1) for at, (op, av) in enumerate(items))

    def item(self, op: Any, av: Any, flags: int, tail: bool) -> str:
        if op in (sre.LITERAL, sre.NOT_LITERAL, sre.ANY, sre.IN):
            return self.char_class(_char_set(op, av, flags))
        if op is sre.BRANCH:
            return "(?:" + "|".join(self.sequence(branch, flags, tail) for branch in av[1]) + ")"
        if op is sre.SUBPATTERN:
            group, add, delete, body = av
            inner = self.sequence(body, _scoped(flags, add, delete), tail)
            return f"(?:{inner})" if group is None or self.linear else f"({inner})"
        if op in (sre.MAX_REPEAT, sre.MIN_REPEAT):
            low, high, body = av
            if self.linear and max(low, 0 if high == sre.MAXREPEAT else high) > _RE2_MAX_COUNT:
                raise _Untranslatable(f"a count over {_RE2_MAX_COUNT}")
            count = f"{{{low},{'' if high == sre.MAXREPEAT else high}}}"
            lazy = "?" if op is sre.MIN_REPEAT else ""
            return f"(?:{self.sequence(body, flags, False)}){count}{lazy}"
        if op is sre.AT:
            return self.anchor(av, flags, tail)
        if self.linear:
            raise _Untranslatable(str(op))
        if op in (sre.ASSERT, sre.ASSERT_NOT):
            direction, body = av
            behind = "<" if direction < 0 else ""
            return f"(?{behind}{'=' if op is sre.ASSERT else '!'}{self.sequence(body, flags, False)})"
        if op is sre.GROUPREF:
            return f"(?i:\\g<{av}>)" if flags & sre.SRE_FLAG_IGNORECASE else f"\\g<{av}>"
        if op is sre.GROUPREF_EXISTS:
            group, yes, no = av
            other = "" if no is None else "|" + self.sequence(no, flags, False)
            return f"(?({group}){self.sequence(yes, flags, False)}{other})"
        raise _Untranslatable(str(op))

    def anchor(self, code: Any, flags: int, tail: bool) -> str:
        multiline = flags & sre.SRE_FLAG_MULTILINE
        if code is sre.AT_BEGINNING_STRING or (code is sre.AT_BEGINNING and not multiline):
            return r"\A"
        if code is sre.AT_BEGINNING:
            return "(?m:^)" if self.linear else r"(?:\A|(?<=\n))"
        if code is sre.AT_END_STRING:
            return r"\z" if self.linear else r"\Z"
        if code is sre.AT_END and multiline:
            return "(?m:$)" if self.linear else r"(?=\n|\Z)"
        if code is sre.AT_END:
            # re's $ also holds before a final newline. RE2 has no look-ahead,
            # but consuming that newline changes nothing where nothing follows.
            if self.linear and not tail:
                raise _Untranslatable("$ with something after it")
            return r"(?:\n?\z)" if self.linear else r"(?=\n?\Z)"
        if self.linear or code not in (sre.AT_BOUNDARY, sre.AT_NON_BOUNDARY):
            raise _Untranslatable(str(code))
        word = self.char_class(_matched_set(r"\w", flags & sre.SRE_FLAG_ASCII))
        if code is sre.AT_BOUNDARY:
            return f"(?:(?<={word})(?!{word})|(?<!{word})(?={word}))"
        inside = f"(?:(?<={word})(?={word})|(?<!{word})(?!{word}))"
        return inside if _NON_BOUNDARY_IN_EMPTY else r"(?!\A\Z)" + inside

    def char_class(self, ranges: Ranges) -> str:
        if self.linear:
            # RE2 reads UTF-8, so a value it reads holds no surrogate.
            ranges = _without(ranges, _SURROGATES)
        if not ranges:
            return f"[^{self.char(0)}-{self.char(_LAST)}]"
        if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
            return self.char(ranges[0][0])
        spans = (self.char(low) if low == high else f"{self.char(low)}-{self.char(high)}" for low, high in ranges)
        return "[" + "".join(spans) + "]"

    def char(self, code: int) -> str:
        if code < 128 and chr(code).isalnum():
            return chr(code)
        return f"\\x{{{code:X}}}" if self.linear else f"\\U{code:08X}"


def _char_set(op: Any, av: Any, flags: int) -> Ranges:
    """The code points one character of ``re``'s parse matches under
    ``flags``; ``re`` itself decides case-insensitive ones and ``\\d``,
    ``\\s``, ``\\w``, on every code point."""
    if flags & sre.SRE_FLAG_IGNORECASE:
        return _matched_set(_python_text(op, av), flags & _CHARACTER_FLAGS)
    if op is sre.LITERAL:
        return ((av, av),)
    if op is sre.NOT_LITERAL:
        return _complement(((av, av),))
    if op is sre.ANY:
        return _EVERYTHING if flags & sre.SRE_FLAG_DOTALL else _complement(((10, 10),))
    ranges: list[tuple[int, int]] = []
    for item, value in av:
        if item is sre.LITERAL:
            ranges.append((value, value))
        elif item is sre.RANGE:
            ranges.append(value)
        elif item is sre.CATEGORY and value in _CATEGORIES:
            ranges.extend(_matched_set(_CATEGORIES[value], flags & sre.SRE_FLAG_ASCII))
        elif item is not sre.NEGATE:
            raise _Untranslatable(str(item))
    merged = _merged(ranges)
    return _complement(merged) if av[0][0] is sre.NEGATE else merged


def _python_text(op: Any, av: Any) -> str:
    """One character of ``re``'s parse as ``re`` syntax again."""
    if op is sre.LITERAL:
        return _python_char(av)
    if op is sre.NOT_LITERAL:
        return f"[^{_python_char(av)}]"
    if op is sre.ANY:
        return "."
    parts = []
    for item, value in av:
        if item is sre.NEGATE:
            parts.append("^")
        elif item is sre.LITERAL:
            parts.append(_python_char(value))
        elif item is sre.RANGE:
            parts.append(f"{_python_char(value[0])}-{_python_char(value[1])}")
        elif item is sre.CATEGORY and value in _CATEGORIES:
            parts.append(_CATEGORIES[value])
        else:
            raise _Untranslatable(str(item))
    return "[" + "".join(parts) + "]"


def _python_char(code: int) -> str:
    return f"\\U{code:08x}"


@cached(4096)
def _matched_set(text: str, flags: int) -> Ranges:
    """The code points ``re`` matches with ``text`` (one character) under
    ``flags``, found by matching every code point."""
    runs = re.compile(f"(?:{text})+", flags).finditer(_every_character())
    return tuple((run.start(), run.end() - 1) for run in runs)


@cached(1)
def _every_character() -> str:
    return "".join(map(chr, range(_LAST + 1)))


def _scoped(flags: int, add: int, delete: int) -> int:
    """The flags inside a group that adds and removes some (as ``re`` combines them)."""
    if add & _TYPE_FLAGS:
        flags &= ~_TYPE_FLAGS
    return (flags | add) & ~delete


def _merged(ranges: list[tuple[int, int]]) -> Ranges:
    out: list[tuple[int, int]] = []
    for low, high in sorted(ranges):
        if out and low <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], high))
        else:
            out.append((low, high))
    return tuple(out)


def _complement(ranges: Ranges) -> Ranges:
    out, start = [], 0
    for low, high in ranges:
        if low > start:
            out.append((start, low - 1))
        start = high + 1
    if start <= _LAST:
        out.append((start, _LAST))
    return tuple(out)


def _without(ranges: Ranges, hole: tuple[int, int]) -> Ranges:
    out = []
    for low, high in ranges:
        if low < hole[0]:
            out.append((low, min(high, hole[0] - 1)))
        if high > hole[1]:
            out.append((max(low, hole[1] + 1), high))
    return tuple(out)
