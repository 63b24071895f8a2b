"""What a dialect's scanner finds in model text: plain text, reasoning, and
calls (a name and argument values, or why the markup is malformed).

Scanning is the dialect's job (it knows its markup); typing the values is the
parser's (it knows the schema), so a value is either :class:`Raw` text, to be
read by its parameter's frame, or :class:`Parsed`, already typed by the
syntax (JSON, Gemma values)."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..caches import cached
from .description import CallSection


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


Value = Raw | Parsed


@dataclass(frozen=True)
class ReasoningBlock:
    """How a dialect marks reasoning in model output, for :func:`scan`.

    ``label``: text the model writes right after ``opening`` (Gemma's
    ``thought\n``), read when there and not part of the reasoning.
    ``opened``: the prompt opened the block, so the text starts inside it.
    ``interleaved``: a complete block later in the text (after some text,
    before a call) is reasoning too (GLM's interleaved thinking).
    ``lone_closing``: a closing marker with no block open ends an empty one
    (the marker leaves the content: Gemma 4 writes ``<channel|>`` so when
    its thinking is off)."""

    opening: str
    closing: str
    label: str = ""
    opened: bool = False
    interleaved: bool = False
    lone_closing: bool = False

    def body_start(self, text: str, at: int) -> int:
        """Where the reasoning starts after an opening ending at ``at``:
        after the label, when the label (or, right before the closing, the
        label less its line break) is there."""
        label = self.label
        if not label:
            return at
        if text.startswith(label, at):
            return at + len(label)
        short = label.rstrip("\n")
        if short != label and text.startswith(short + self.closing, at):
            return at + len(short)
        return at

    def leading(self, text: str) -> int | None:
        """Where the reasoning that ``text`` starts with begins, or
        ``None``: inside the block the prompt opened, after an opening
        (after leading whitespace), or, for ``lone_closing``, at a closing
        marker there (an empty block)."""
        if self.opened:
            return self.body_start(text, 0)
        stripped = len(text) - len(text.lstrip())
        if text.startswith(self.opening, stripped):
            return self.body_start(text, stripped + len(self.opening))
        if self.lone_closing and text.startswith(self.closing, stripped):
            return stripped
        return None


@dataclass(frozen=True)
class Segment:
    """Plain text or reasoning, at ``text[start:end]`` of the scanned text."""

    kind: str
    text: str
    start: int
    end: int
    fenced: bool = field(default=False, compare=False)
    """Whether the segment starts inside a fenced code block: the state a
    scan resumed at its start begins with (see :func:`scan`)."""


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
    fenced: bool = field(default=False, compare=False)
    """As :attr:`Segment.fenced`."""


class OpenValue(ABC):
    """A value still being written where a partial reading of a call
    stopped, read on as the call's text comes, so that streaming reads only
    the new text: as long as :meth:`more` returns text, reading the longer
    body again would give the same :class:`Partial`, its ``open_text``
    longer by that text (``None`` staying ``None``)."""

    @abstractmethod
    def more(self, text: str) -> str | None:
        """Read ``text``, what the body goes on with; return what it adds to
        the value's ``open_text`` (empty when nothing, or when the value has
        none), or ``None`` when the value may have ended: only a new reading
        of the body says what it shows then."""


class MarkedText(OpenValue):
    """Text that runs to the first match of ``ends`` (a raw value, a
    delimited string): a tail that may be the start of one of ``holds``
    (every end among them) is held back, as :func:`held_back_all` does, and
    the first ``lead`` characters are markup, not the value's text. ``tail``
    is what the reading so far held back."""

    def __init__(self, ends: re.Pattern[str], holds: tuple[str, ...], tail: str, lead: int = 0) -> None:
        self.ends = ends
        self.holds = holds
        self.tail = tail
        self.lead = lead

    def more(self, text: str) -> str | None:
        # An end that the text completes began in the tail (it was held back).
        window = self.tail + text
        if self.ends.search(window):
            return None
        certain = held_back_all(window, self.holds)
        self.tail = window[len(certain) :]
        skipped = min(self.lead, len(certain))
        self.lead -= skipped
        return certain[skipped:]


class Nested(OpenValue):
    """An object or array still being written, from its opening bracket:
    while its brackets outside strings (between ``quote``s; with
    ``escapes``, a backslash escapes the next character in them) have not
    closed, no reading can be complete, so none changes, and :meth:`more`
    gives ``""``. When they close in the text the reading stopped in, the
    value is broken for good: nothing changes any more."""

    def __init__(self, text: str, quote: str, escapes: bool) -> None:
        self.quote = quote
        self.tokens = re.compile(r"[\[\]{}]|" + re.escape(quote))
        self.string_end = re.compile(re.escape(quote) + (r"|\\" if escapes else ""))
        self.depth = 0
        self.string = False
        self.tail = ""
        self.broken = False
        self.broken = self.more(text) is None

    def more(self, text: str) -> str | None:
        if self.broken:
            return ""
        text = self.tail + text
        position, escaped = 0, False
        while True:
            if self.string:
                found = self.string_end.search(text, position)
                if found is None:
                    break
                if found.group() == "\\":
                    escaped = found.end() == len(text)
                    if escaped:
                        break
                    position = found.end() + 1
                    continue
                self.string, position = False, found.end()
                continue
            found = self.tokens.search(text, position)
            if found is None:
                break
            position = found.end()
            if found.group() == self.quote:
                self.string = True
            elif found.group() in "[{":
                self.depth += 1
            else:
                self.depth -= 1
                if self.depth == 0:
                    return None
        rest = text[position:]
        self.tail = "\\" if escaped else rest[len(held_back(rest, self.quote)) :]
        return ""


@dataclass
class Partial:
    """What an unfinished call shows so far: its name once complete, its
    complete argument pairs, and the key and text of a raw value still being
    written (minus any tail that may be the start of its closing).

    ``resume_at`` is where in the body the reading of a longer text of it
    can go on from, with this name and these pairs (``partial_body``'s
    ``resume``): the end of the last complete pair, or where the first one
    starts. ``open_value`` reads on the value being written, when the
    dialect can follow it (:class:`OpenValue`)."""

    name: str | None = None
    pairs: list[tuple[str, Value]] = field(default_factory=list)
    open_key: str | None = None
    open_text: str | None = None
    resume_at: int = 0
    open_value: OpenValue | None = None


def held_back(text: str, closing: str) -> str:
    """``text`` without its longest tail that is a proper start of ``closing``:
    that tail may yet turn out to be the closing, not value text."""
    return held_back_all(text, (closing,))


def held_back_all(text: str, markers: tuple[str, ...]) -> str:
    """``text`` without its longest tail that is a proper start of one of
    ``markers`` (found by one regex: streaming asks this at every feed)."""
    pattern, longest = _starts_at_end(markers)
    found = pattern.search(text, max(0, len(text) - longest + 1))
    return text if found is None else text[: found.start()]


@cached(1024)
def _starts_at_end(markers: tuple[str, ...]) -> tuple[re.Pattern[str], int]:
    """A regex of a proper, non-empty start of one of ``markers`` that runs
    to the end of the text (the leftmost match is the longest), and the
    longest marker's length."""

    def starts(marker: str) -> str:
        pattern = ""
        for char in reversed(marker[:-1]):
            pattern = re.escape(char) + (f"(?:{pattern})?" if pattern else "")
        return pattern

    alternatives = [starts(m) for m in markers if len(m) > 1]
    pattern = f"(?:{'|'.join(alternatives)})\\Z" if alternatives else "(?!)"
    return re.compile(pattern), max(map(len, markers), default=0)


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
    reasoning: ReasoningBlock | None,
    cut_off_call: bool = False,
    start: int = 0,
    fenced: bool = False,
    section: CallSection | None = None,
    after_call: bool = False,
    self_closing: re.Pattern[str] | None = None,
) -> Iterator[Segment | CallSegment]:
    """Split ``text`` into reasoning (a leading block), plain text and calls
    between ``call_open`` and ``call_close``. A call marker inside a fenced
    code block of the plain text, or a call without its closing marker, is a
    malformed call; with ``cut_off_call``, a call without its closing marker
    at the very end of the text is read when its body parses as it stands
    (a complete JSON object: hermes).

    The segments read left to right, each from where the one before ends
    and the fence state there, so a scan can resume at ``start`` with
    ``fenced``: at a segment's start (:attr:`Segment.fenced`), or in a text
    segment before any call marker, where no code-fence line is cut (the
    character before ``start`` is no space, tab or backtick; the blanks
    before a segment's start and the character before them must be in
    ``text``, as a fence line's start looks at them: :func:`fences_in`).

    With a calls ``section``, its opening right before a call (with the
    section's lead before it, when there, and any whitespace after it) is a
    ``section_opening`` segment and its closing right after a call (with
    the section's inner text before it, when there) a ``section_closing``:
    markup of the call beside them, which leaves the content with that call.
    ``after_call``: a call ends at ``start`` (a scan resumed there).

    Reasoning (see :class:`ReasoningBlock`): a block at the start of the
    text (or the text itself, when the prompt opened the block) runs to its
    closing marker, else to the first call opening, else to the end of the
    text (a turn that stops inside the block is reasoning); the spaces and
    line breaks after a closing marker belong to the block. Where the
    dialect says so, a complete block or a lone closing marker in plain
    text is reasoning too."""
    position = start
    closing = _closing_markup(text, start, section, fenced) if after_call else None
    if closing is not None:
        yield closing
        position = closing.end
    if reasoning is not None and start == 0:
        position = yield from _leading_reasoning(text, reasoning, call_open)
    while position < len(text):
        opening = text.find(call_open, position)
        if reasoning is not None and (reasoning.interleaved or reasoning.lone_closing) and not fenced:
            found = _inner_reasoning(text, reasoning, position, len(text) if opening < 0 else opening)
            if found is not None:
                block_start, body, body_end, block_end = found
                if block_start > position:
                    yield Segment("text", text[position:block_start], position, block_start, fenced)
                yield Segment("reasoning", text[body:body_end], block_start, block_end)
                position = block_end
                continue
        if opening < 0:
            yield Segment("text", text[position:], position, len(text), fenced)
            return
        if opening > position:
            yield from _before_call(text, position, opening, fenced, section)
            fenced ^= fences_in(text, position, opening) % 2 == 1
        close = text.find(call_close, opening + len(call_open))
        end = len(text) if close < 0 else close + len(call_close)
        short = self_closing.match(text, opening + len(call_open)) if self_closing and not fenced else None
        if short is not None and (close < 0 or short.end() <= close):
            end = short.end()
            yield CallSegment(text[opening:end], opening, end, short.group("name"))
        elif fenced:
            yield CallSegment(text[opening:end], opening, end, None, error=FENCED, fenced=True)
        elif close < 0 and not cut_off_call:
            yield CallSegment(text[opening:end], opening, end, None, error=f"the call is not closed with {call_close!r}")
        else:
            yield _read_call(text, opening, end, text[opening + len(call_open) : close if close >= 0 else end],
                             parse_body, "" if close >= 0 else call_close)
        position = end
        closing = _closing_markup(text, position, section, fenced)
        if closing is not None:
            yield closing
            position = closing.end


def _read_call(text: str, opening: int, end: int, body: str, parse_body: BodyParser, missing_close: str) -> CallSegment:
    """The call at ``text[opening:end]`` as ``parse_body`` reads ``body``
    (``missing_close``: the closing marker it lacks, if it does)."""
    try:
        name, pairs = parse_body(body)
    except Malformed as exc:
        cut_off = f"the call is not closed with {missing_close!r}, and is incomplete without it: " if missing_close else ""
        return CallSegment(text[opening:end], opening, end, exc.name, error=cut_off + exc.reason)
    return CallSegment(text[opening:end], opening, end, name, tuple(pairs))


def _before_call(text: str, start: int, call: int, fenced: bool, section: CallSection | None) -> Iterator[Segment]:
    """The text from ``start`` to a call at ``call``: plain text, then, where
    it ends with a calls section's opening, that markup (with the section's
    lead before it when there, and any whitespace after it)."""
    at = call
    before = text[start:call].rstrip()
    if section is not None and before.endswith(section.opening):
        at = start + len(before) - len(section.opening)
        lead = section.lead
        if lead and at - len(lead) >= start and text.startswith(lead, at - len(lead)):
            at -= len(lead)
    if at > start:
        yield Segment("text", text[start:at], start, at, fenced)
    if at < call:  # in the fence state the text before it leaves (a stream goes on from there)
        yield Segment("section_opening", text[at:call], at, call, fenced ^ (fences_in(text, start, at) % 2 == 1))


def _closing_markup(text: str, at: int, section: CallSection | None, fenced: bool) -> Segment | None:
    """A calls section's closing right after a call that ends at ``at``
    (with the section's inner text before it when there), or ``None``."""
    if section is None or fenced:
        return None
    for markup in (section.inner + section.closing, section.closing):
        if text.startswith(markup, at):
            return Segment("section_closing", markup, at, at + len(markup))
    return None


def _leading_reasoning(text: str, block: ReasoningBlock, call_open: str) -> Generator[Segment, None, int]:
    """The reasoning segment ``text`` starts with, if any; returns where
    the scan goes on."""
    body = block.leading(text)
    if body is None:
        return 0
    close = text.find(block.closing, body)
    if close >= 0:
        end = _after_blank(text, close + len(block.closing))
    else:
        call = text.find(call_open, body)
        close = end = len(text) if call < 0 else call
    yield Segment("reasoning", text[body:close], 0, end)
    return end


def _inner_reasoning(text: str, block: ReasoningBlock, start: int, stop: int) -> tuple[int, int, int, int] | None:
    """The first reasoning in plain text ``text[start:stop]`` outside fenced
    code: a complete block (``interleaved``) or a lone closing marker
    (``lone_closing``), as (block start, body start, body end, block end)."""
    opening = text.find(block.opening, start, stop) if block.interleaved else -1
    lone = text.find(block.closing, start, stop if opening < 0 else opening) if block.lone_closing else -1
    if lone >= 0:
        found = (lone, lone, lone, _after_blank(text, lone + len(block.closing), stop))
    elif opening >= 0:
        body = block.body_start(text, opening + len(block.opening))
        close = text.find(block.closing, body, stop)
        if close < 0:
            return None
        found = (opening, body, close, _after_blank(text, close + len(block.closing), stop))
    else:
        return None
    return None if fences_in(text, start, found[0]) % 2 == 1 else found


def _after_blank(text: str, at: int, stop: int | None = None) -> int:
    """``at`` after the spaces and line breaks there: those after a reasoning
    block's closing are the template's, not content."""
    stop = len(text) if stop is None else stop
    while at < stop and text[at] in " \t\r\n":
        at += 1
    return at


FENCED = "a call marker inside a fenced code block is text, not a call"
_FENCE = re.compile(r"^[ \t]*```", re.MULTILINE)


def fences_in(text: str, start: int, end: int | None = None) -> int:
    """How many code-fence lines (```) ``text[start:end]`` holds: a call
    marker after an odd count is inside a fenced block. A line is the
    whole text's: one that ``start`` is in counts when only blanks come
    before ``start`` on it."""
    while start > 0 and text[start - 1] in " \t":
        start -= 1
    return len(_FENCE.findall(text, start, len(text) if end is None else end))


_PLAIN_LINE = r"[ \t]*(?:[^ \t\n`][^\n]*|`(?:[^`\n][^\n]*)?|``(?:[^`\n][^\n]*)?)?"
_FENCE_LINE = r"[ \t]*```[^\n]*"


def paired_fences(line_start: bool) -> str:
    """A regex of text whose code-fence lines, as :func:`fences_in` counts
    them, come in pairs: a call marker right after such text is a call.
    The grammar writes the text before a turn's first call so. Without
    ``line_start`` the text goes on a line begun before it (after a
    reasoning block's closing), so its first line is never a fence."""
    plain, fence = _PLAIN_LINE, _FENCE_LINE
    even = rf"(?:{plain}\n)*(?:{fence}\n(?:{plain}\n)*{fence}\n(?:{plain}\n)*)*"
    lines = rf"{even}(?:{plain}|{fence}\n(?:{plain}\n)*{fence})"
    return lines if line_start else rf"[^\n]*(?:\n{lines})?"
