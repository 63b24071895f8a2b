"""What a dialect's scanner finds in model text: plain text, reasoning, and
calls (a name and argument values, or why the markup is malformed).

Scanning is the dialect's job (it knows its markup); typing the values is the
parser's (it knows the schema), so a value is either :class:`Raw` text, to be
read by its parameter's frame, or :class:`Parsed`, already typed by the
syntax (JSON, Gemma values)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Union


@dataclass(frozen=True)
class Raw:
    """A value written as raw text (qwen3_coder, glm): its type comes from
    the schema."""

    text: str


@dataclass(frozen=True)
class Parsed:
    """A value whose syntax already says its type."""

    value: Any


@dataclass(frozen=True)
class Decoded(Parsed):
    """A value of arguments the call wrote as a JSON-encoded string (hermes'
    drift), decoded: typed like :class:`Parsed`, and a call that does not
    validate says its arguments were decoded."""


Value = Union[Raw, Parsed]


@dataclass(frozen=True)
class Segment:
    """Plain text or reasoning, at ``text[start:end]`` of the scanned text."""

    kind: str
    text: str
    start: int
    end: int


@dataclass(frozen=True)
class CallSegment:
    """One call's markup at ``text[start:end]``: its name and argument pairs
    in source order, or ``error`` when the markup is malformed."""

    text: str
    start: int
    end: int
    name: str | None
    arguments: tuple[tuple[str, Value], ...] = ()
    error: str | None = None
    kind: str = "call"


@dataclass
class Partial:
    """What an unfinished call shows so far: its name once complete, its
    complete argument pairs, and the key and text of a raw value still being
    written (minus any tail that may be the start of its closing)."""

    name: str | None = None
    pairs: list[tuple[str, Value]] = field(default_factory=list)
    open_key: str | None = None
    open_text: str | None = None


def held_back(text: str, closing: str) -> str:
    """``text`` without its longest tail that is a proper start of ``closing``:
    that tail may yet turn out to be the closing, not value text."""
    for size in range(min(len(closing) - 1, len(text)), 0, -1):
        if closing.startswith(text[-size:]):
            return text[:-size]
    return text


class Malformed(Exception):
    """The markup of a call is not what the dialect's grammar writes."""

    def __init__(self, reason: str, name: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.name = name


BodyParser = Callable[[str], "tuple[str, list[tuple[str, Value]]]"]


def scan(
    text: str,
    *,
    call_open: str,
    call_close: str,
    parse_body: BodyParser,
    reasoning: tuple[str, str] | None,
    cut_off_call: bool = False,
) -> Iterator[Segment | CallSegment]:
    """Split ``text`` into reasoning (a leading block), plain text and calls
    between ``call_open`` and ``call_close``. A call marker inside a fenced
    code block of the plain text, or a call without its closing marker, is a
    malformed call; with ``cut_off_call``, a call without its closing marker
    at the very end of the text is read when its body parses as it stands
    (a complete JSON object: hermes)."""
    position = 0
    if reasoning is not None:
        opening, closing = reasoning
        stripped = len(text) - len(text.lstrip())
        if text.startswith(opening, stripped):
            end = text.find(closing, stripped + len(opening))
            if end >= 0:
                yield Segment("reasoning", text[stripped + len(opening) : end], 0, end + len(closing))
                position = end + len(closing)
    fenced = False
    while position < len(text):
        start = text.find(call_open, position)
        if start < 0:
            yield Segment("text", text[position:], position, len(text))
            return
        if start > position:
            yield Segment("text", text[position:start], position, start)
            fenced ^= fences_in(text, position, start) % 2 == 1
        close = text.find(call_close, start + len(call_open))
        end = len(text) if close < 0 else close + len(call_close)
        markup = text[start:end]
        if fenced:
            yield CallSegment(markup, start, end, None, error=FENCED)
        elif close < 0 and not cut_off_call:
            yield CallSegment(markup, start, end, None, error=f"the call is not closed with {call_close!r}")
        else:
            try:
                name, pairs = parse_body(text[start + len(call_open) : close if close >= 0 else end])
            except Malformed as exc:
                cut_off = f"the call is not closed with {call_close!r}, and is incomplete without it: "
                yield CallSegment(markup, start, end, exc.name, error=(cut_off if close < 0 else "") + exc.reason)
            else:
                yield CallSegment(markup, start, end, name, tuple(pairs))
        position = end


FENCED = "a call marker inside a fenced code block is text, not a call"
_FENCE = re.compile(r"^[ \t]*```", re.MULTILINE)


def fences_in(text: str, start: int, end: int | None = None) -> int:
    """How many code-fence lines (```) ``text[start:end]`` holds: a call
    marker after an odd count is inside a fenced block."""
    return len(_FENCE.findall(text, start, len(text) if end is None else end))
