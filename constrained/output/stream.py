"""Streaming: model text in deltas -> OpenAI-style streaming deltas.

``feed`` returns content deltas for text outside calls, a first delta for
each call (index, id, name) and then fragments of its ``arguments``.

**What is settled comes from the dialect's own scan.** The text is
scanned (:meth:`Dialect.scan`, the reading :func:`parse_tool_calls` makes)
into reasoning, text and call segments. The scanners read left to right, so
a segment that another one follows is settled, and a settled call is
accepted or rejected exactly as the non-streaming parser does it
(:func:`openai_call`). What is not settled:

- the last segment. Text is sent up to the first place where a call may
  still start: a call opening, or a tail that may be the start of one. The
  openings are the dialect's ``call_open`` and, where the scan also reads a
  call whose opening is missing (drift), the start of a call body it reads
  so, found once by scanning each tool's rendered call body (qwen3_coder:
  ``<function=``). A call (even ``<tool_call>`` alone in prose) waits until
  it is settled, by what follows or by ``close()``, except that it streams
  once the dialect's partial reading shows a declared tool's name: its first
  delta, then the part of its final ``arguments`` already certain (the
  parser serializes them as ``json.dumps`` does, one complete argument after
  another; a string parameter's text streams as it arrives, in every
  dialect; other values once complete).
- a call and the text after it, while the scan may still take that text
  into the call (qwen3_coder reads a ``</tool_call>`` after a bare call as
  its end): probed by scanning the text as if the call's closing marker came
  next.
- everything, while a leading reasoning block may still form or has not
  closed (one the prompt opened included: it ends at its closing, or,
  without one, at the first call or the end of the text, which only
  ``close()`` knows). Reasoning is not content and is not streamed (it is
  in :attr:`ToolCallStreamParser.result`). Where the dialect reads
  reasoning later in the text, text is held from a reasoning opening as
  from a call opening.

So, for every text and every way of cutting it into pieces, the content
deltas concatenate to exactly ``parse_tool_calls(text).content``, and the
calls streamed and not reported below are exactly its ``tool_calls`` (the
fragments of a call concatenate to its ``arguments``; the ids are those of
:attr:`ToolCallStreamParser.result`: every output has its own). No text is
ever lost: a call rejected when it settles (or at ``close()``) comes out as
content, and when it had been streamed (its fragments cannot be taken back),
a ``{"tool_call_errors": [{"index", "id", "reason"}]}`` delta reports it
first. ``close()`` settles everything and sends what was held back;
:attr:`ToolCallStreamParser.result` is then the authoritative
:class:`ParseResult`.

**Cost: a feed costs what its delta does, not what the text so far does.**
The text is kept in pieces (a feed copies at most a short last piece), and
nothing settled is read again:

- the scan resumes where the settled text ends, with the fence state
  there: at the first segment not settled, or in a text segment at what
  was sent of it (:func:`~constrained.dialects.segments.scan`);
- a call being written keeps its partial reading. A reading goes on from
  the end of the last complete pair (``partial_body``'s ``resume``), and a
  value it stopped in is read on from the new text only, by the dialect's
  :class:`~constrained.dialects.segments.OpenValue`: a string's text is
  escaped and sent as it comes, a raw value or an object or array waits for
  its end. A value's end reads the value again (once); the call is scanned
  when it starts and when its closing marker comes, and read whole once
  more when it settles;
- while nothing can change before some text comes (a leading reasoning
  block before its closing, a call read without its opening marker, such as
  qwen3_coder's bare ``<function=``, before its ``</function>``), a feed
  only looks for that text.

Each feed also reads a few characters before its delta, as many as the
longest marker it looks for (a marker may be cut between feeds). Read again
at each feed, from where they start, all short in what the grammar writes:
a call's head until its tool name is complete (a head that can no longer
read stops the call's streaming at once), a bare scalar being written,
markup after a call's last complete pair that does not read (in gemma4 and
hermes, until the call closes), a text segment's tail of spaces, tabs and
backticks (a fence line may be in it), and a call read without its opening
marker between its end and what settles it.
"""

from __future__ import annotations

import bisect
import copy
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ..dialects.segments import CallSegment, Malformed, Segment, fences_in, held_back, held_back_all
from ..errors import StreamClosedError
from ..options import Reasoning
from .parse import CallIds, CallRejected, ParseResult, openai_call, read_output, reader, usable_tools
from .stream_reading import OpenCall, arguments_prefix, call_openings, markup_markers, reasoning_markers

Delta = dict[str, Any]


@dataclass
class _StreamedCall:
    start: int
    index: int
    id: str
    sent: list[str] = field(default_factory=list)
    """The arguments text sent, in fragments (joined only to compare)."""
    seen: bool = True

    def sent_text(self) -> str:
        if len(self.sent) > 1:
            self.sent[:] = ["".join(self.sent)]
        return self.sent[0] if self.sent else ""


class _Text:
    """The text so far, in pieces: adding to it copies no more than a short
    last piece, and reading a stretch of it costs that stretch's length."""

    PIECE = 256
    """A last piece shorter than this takes the next delta in."""

    def __init__(self) -> None:
        self.pieces: list[str] = []
        self.starts: list[int] = []
        self.length = 0

    def add(self, delta: str) -> None:
        if self.pieces and len(self.pieces[-1]) < self.PIECE:
            self.pieces[-1] += delta
        elif delta:
            self.pieces.append(delta)
            self.starts.append(self.length)
        self.length += len(delta)

    def read(self, start: int, end: int | None = None) -> str:
        """``text[start:end]``."""
        end = self.length if end is None else end
        if start >= end:
            return ""
        first = bisect.bisect_right(self.starts, start) - 1
        last = bisect.bisect_left(self.starts, end)
        joined = self.pieces[first] if last - first == 1 else "".join(self.pieces[first:last])
        offset = self.starts[first]
        return joined[start - offset : end - offset]


class ToolCallStreamParser:
    """Incremental :func:`parse_tool_calls` for one model output."""

    def __init__(self, tools: Any, dialect: str, *, reasoning: Reasoning | None = None) -> None:
        self.dialect = reader(dialect, tools, reasoning)
        self.tool_set = usable_tools(tools, self.dialect)
        self._ids = CallIds()
        self.tools = self.tool_set.by_name()
        self.result: ParseResult | None = None
        self._text = _Text()
        self._reader = copy.copy(self.dialect.for_tools(self.tools))
        self._call_openings = call_openings(self._reader.reading(True), self.tools)
        self._openings = self._call_openings + reasoning_markers(self._reader) + markup_markers(self._reader)
        messages = self.dialect.markup.messages
        self._call_ends = (self.dialect.markup.close,) if messages is None else messages.call_ends(self.dialect.markup)
        # A segment the scan reads again (a call not settled yet) has its body parsed once.
        self._bodies = _ReadBodies(self._reader.parse_body)
        self._reader.parse_body = self._bodies  # type: ignore[method-assign]
        self._left_out = self.tool_set.left_out_by_name()
        self._position = 0  # text before this offset is settled and sent (or part of the open call)
        self._base = 0  # the scan goes on from here (see _rebase) ...
        self._fenced = False  # ... inside a fenced code block or not
        self._after_call = False  # ... right after a call or not
        self._rejected = False  # whether the last call settled was rejected (then its section's closing is content)
        self._work = ""  # the text from _work_at, for one advance
        self._work_at = 0
        self._reasoning = self.dialect.reasoning_block()
        self._reasoning_decided = self._reasoning is None  # no leading reasoning block may form any more
        self._wait: tuple[int, tuple[str, ...]] | None = None  # nothing changes before one of these texts comes after this offset
        self._call: _StreamedCall | None = None
        self._open: OpenCall | None = None
        self._streamed = 0

    @property
    def text(self) -> str:
        """The text fed so far."""
        return self._text.read(0)

    def feed(self, delta: str) -> list[Delta]:
        """Add model text; return the deltas it settles."""
        if self.result is not None:
            raise StreamClosedError("feed() after close(): the stream's result is final; use a new ToolCallStreamParser for new output")
        before = self._text.length
        self._text.add(delta)
        if self._waits(before):
            return []
        deltas = self._feed_open_call(before)
        return self._advance(final=False) if deltas is None else deltas

    def close(self) -> list[Delta]:
        """Finish: settle every segment, send what was held back, and report
        streamed calls the complete text rejects."""
        if self.result is not None:
            return []
        deltas = self._advance(final=True)
        self.result = read_output(self.text, self.tool_set, self.dialect, self._ids)
        return deltas

    # -- segments --------------------------------------------------------------------

    def _line_context(self, at: int) -> int:
        """Where the text to scan from ``at`` starts: the blanks before
        ``at`` and the character before them, which say whether a fence
        line starts there (:func:`fences_in`)."""
        step = 64
        while True:
            start = max(0, at - step)
            before = self._text.read(start, at)
            blank = len(before) - len(before.rstrip(" \t"))
            if blank < len(before) or start == 0:
                return max(0, at - blank - 1)
            step *= 2

    def _advance(self, *, final: bool) -> list[Delta]:
        deltas: list[Delta] = []
        self._work_at = self._line_context(self._base)
        self._work = self._text.read(self._work_at)
        context = self._base - self._work_at
        segments = [_moved(s, self._work_at) for s in self._reader.scan(self._work, context, self._fenced, self._after_call)]
        self._bodies.forget_unused()
        if not final and self._reasoning_may_form(segments):
            return deltas
        open_segments = [s for s in segments if s.end > self._position]
        last = len(open_segments) - 1
        if not final and last > 0 and open_segments[last].kind == "text" and self._may_grow(open_segments[last - 1]):
            last -= 1  # the text after the call waits with it
        if self._call is not None:
            self._call.seen = False
        for number, segment in enumerate(open_segments[: last + 1]):
            settled = final or number < last
            if isinstance(segment, CallSegment):
                self._call_segment(deltas, segment, settled)
            elif segment.kind == "text":
                self._content(deltas, segment.end if settled else self._hold(segment))
            elif segment.kind == "section_opening":
                continue  # it leaves the content with its call: sent with the call if that is rejected
            elif segment.kind == "section_closing" and settled and self._rejected:
                self._content(deltas, segment.end)
            if settled:
                self._position = segment.end
        if self._call is not None and not self._call.seen:
            # The scan no longer reads a call where one was being streamed
            # (the text there is settled by the segments that cover it now).
            self._reject(deltas, "the call is no longer read as a call")
        if not final:
            self._rebase(segments)
        return _merged(deltas)

    def _rebase(self, segments: list[Segment | CallSegment]) -> None:
        """Let the next scan start at the first segment not settled, or, in
        a text segment, at what was sent of it, where no code-fence line is
        cut (see :func:`~constrained.dialects.segments.scan`): the text
        before is settled, and the scan reads the rest as it would the
        whole text."""
        pending = next((s for s in segments if s.end > self._position), None)
        if pending is not None and pending is segments[-1] and pending.kind == "reasoning" and self._reasoning:
            # Reasoning not closed yet: nothing changes before a marker comes.
            self._wait = (pending.start, (self._reasoning.closing, *self._openings, *self._call_ends))
        if pending is not None and pending.kind != "text":
            self._after_call = pending.kind == "section_closing"  # read only right after its call
            self._base, self._fenced = pending.start, pending.fenced
            if pending.kind == "section_opening":  # the scan starts there, with the call after it
                after = segments.index(pending) + 1
                pending = segments[after] if after < len(segments) else pending
            if self._open is not None and self._open.start != pending.start:
                self._open = None
            ends = self.dialect.drift.bare_call_ends
            bare = pending.kind == "call" and not pending.text.startswith(self.dialect.markup.open)
            if bare and ends and pending is segments[-1] and not any(end in pending.text for end in ends):
                self._wait = (pending.start, (self.dialect.markup.open, *ends))  # the call runs on
            return
        self._open = None
        text = pending if pending is not None else segments[-1] if segments else None
        if text is None:
            return
        base = self._position
        while base > text.start and self._work[base - 1 - self._work_at] in " \t`":
            base -= 1
        inside = fences_in(self._work, text.start - self._work_at, base - self._work_at) % 2 == 1
        # Text right after a call may yet turn into a calls section's closing
        # (a scan that starts there was told so already).
        after_call = self._after_call and base == self._base
        self._after_call = base == text.start and (after_call or any(
            isinstance(s, CallSegment) and s.end == base for s in segments))
        self._base, self._fenced = base, text.fenced ^ inside

    def _waits(self, before: int) -> bool:
        """Whether what came since ``before`` leaves everything as it was:
        the last advance found nothing could change before one of the texts
        of :attr:`_wait` comes, and none has."""
        if self._wait is None:
            return False
        start, texts = self._wait
        window = self._text.read(max(start, before - max(map(len, texts)) + 1))
        if any(text in window for text in texts):
            self._wait = None
            return False
        return True

    def _reasoning_may_form(self, segments: list[Segment | CallSegment]) -> bool:
        """Whether the text so far may still open a leading reasoning block,
        or is inside one not closed yet (then nothing is settled: the whole
        text may become reasoning, and where the block ends depends on
        whether its closing comes)."""
        block = self._reasoning
        if block is None or self._position > 0 or self._reasoning_decided:
            return False
        work = self._work  # nothing is settled: the work is the whole text
        stripped = work.lstrip()
        starts = (block.opening, block.closing) if block.lone_closing else (block.opening,)
        if not block.opened and any(marker.startswith(stripped) for marker in starts):
            return True
        body = block.leading(work)
        if body is not None and block.closing not in work[body:]:
            self._wait = (body, (block.closing,))
            return True
        self._reasoning_decided = True
        return False

    def _may_grow(self, segment: Segment | CallSegment) -> bool:
        """Whether the call ``segment``, which text follows, may still take
        that text in: whether the scan reads it longer once the text goes on
        with the call's closing marker (or the rest of one it ends in)."""
        if not isinstance(segment, CallSegment):
            return False
        closing = self.dialect.markup.close
        start, end = segment.start - self._work_at, segment.end - self._work_at
        for size in range(len(closing)):
            if self._work.endswith(closing[:size]):
                probe = self._reader.scan(
                    self._work + closing[size:], self._base - self._work_at, self._fenced, self._after_call
                )
                if any(s.start == start and s.end > end for s in probe):
                    return True
        return False

    def _hold(self, segment: Segment) -> int:
        """Where the open text segment may start turning into a call: the
        first call opening in it, or a tail that may be the start of one."""
        text = self._work[segment.start - self._work_at : segment.end - self._work_at]
        cut = min(len(held_back(text, opening)) for opening in self._openings)
        for opening in self._openings:
            found = text.find(opening)
            if found >= 0:
                cut = min(cut, found)
        block = self._reasoning
        if block is not None and block.interleaved and text.startswith(block.opening, cut):
            # A later reasoning block: nothing changes before its closing or a call comes.
            self._wait = (segment.start + cut, (block.closing, *self._call_openings))
        return segment.start + cut

    def _content(self, deltas: list[Delta], end: int) -> None:
        if end > self._position:
            deltas.append({"content": self._work[self._position - self._work_at : end - self._work_at]})
            self._position = end

    # -- calls -----------------------------------------------------------------------

    def _call_segment(self, deltas: list[Delta], segment: CallSegment, settled: bool) -> None:
        streamed = self._call if self._call is not None and self._call.start == segment.start else None
        if streamed is not None:
            streamed.seen = True
        if not settled:
            if segment.text.startswith(self.dialect.markup.open):
                self._read_open_call(deltas, segment)
            return
        if self._open is not None and self._open.start == segment.start:
            self._open = None
        try:
            accepted = openai_call(segment, self.tools, self.dialect.drift.python_literals, self._ids, self._left_out)
        except CallRejected as exc:
            if streamed is not None:
                self._reject(deltas, str(exc))
            self._content(deltas, segment.end)
            self._rejected = True
            return
        call = streamed or self._start(deltas, segment.start, accepted["function"]["name"])
        self._send(deltas, call, accepted["function"]["arguments"])
        self._call, self._rejected = None, False

    def _feed_open_call(self, before: int) -> list[Delta] | None:
        """The deltas of a feed that only adds to the open call, which the
        last advance left as the last segment: what its body gains is read
        on. ``None`` when the whole advance must run (the call's closing
        came, or there is no such call)."""
        call = self._open
        if call is None or call.closed:
            return None
        window = self._text.read(max(call.body, before - max(map(len, self._call_ends)) + 1))
        if any(end in window for end in self._call_ends):
            return None
        if call.quiet:
            return []
        deltas: list[Delta] = []
        self._read_call(deltas, call, self._text.length - len(window) + len(held_back_all(window, self._call_ends)))
        return _merged(deltas)

    def _read_open_call(self, deltas: list[Delta], segment: CallSegment) -> None:
        """Read on the call ``segment`` (not settled): its body, less its
        closing, or less a tail that may be the start of it."""
        opening, closing = self.dialect.markup.open, self.dialect.markup.close
        if self._open is None or self._open.start != segment.start:
            self._open = OpenCall(segment.start, segment.start + len(opening))
        call = self._open
        call.closed = segment.end - call.body >= len(closing) and segment.text.endswith(closing)
        if call.closed:
            end = segment.end - len(closing)
        else:
            tail = segment.text[max(len(opening), len(segment.text) - max(map(len, self._call_ends)) + 1) :]
            end = segment.end - len(tail) + len(held_back_all(tail, self._call_ends))
        if not call.quiet:
            self._read_call(deltas, call, end)

    def _read_call(self, deltas: list[Delta], call: OpenCall, end: int) -> None:
        """Read the open call's body up to ``end`` and stream what it shows."""
        if end <= call.read:
            return
        value = call.reading.open_value
        if value is not None:
            more = value.more(self._text.read(call.read, end))
            if more is not None:
                call.read = end
                if more and call.shape is not None:
                    pairs, key, length = call.shape
                    call.shape = (pairs, key, length + len(more))
                    if call.streams_open:
                        self._send_open_text(deltas, more)
                return
        resume = call.reading if call.reading.name is not None else None
        at = call.body if resume is None else call.at + resume.resume_at
        try:
            reading = self._reader.partial_body(self._text.read(at, end), resume)
        except Malformed:
            call.quiet = True  # markup that stays malformed as the text goes on
            return
        call.reading, call.at, call.read = reading, at, end
        tool = self.tools.get(reading.name or "")
        if tool is None:
            call.quiet = reading.name is not None  # no declared tool of that name
            return
        streamed = self._call if self._call is not None and self._call.start == call.start else None
        if streamed is None:
            streamed = self._start(deltas, call.start, tool.name)
        shape = (len(reading.pairs), reading.open_key, -1 if reading.open_text is None else len(reading.open_text))
        if shape == call.shape:
            return
        call.shape = shape
        arguments = arguments_prefix(tool, call, self.dialect.drift.python_literals)
        if arguments is None:
            call.quiet = True  # something read will not validate: nothing more is certain
        elif not self._send(deltas, streamed, arguments):
            call.streams_open = False

    def _start(self, deltas: list[Delta], start: int, name: str) -> _StreamedCall:
        call = _StreamedCall(start, self._streamed, self._ids(start, name))
        self._streamed += 1
        self._call = call
        first = {"index": call.index, "id": call.id, "type": "function", "function": {"name": name, "arguments": ""}}
        deltas.append({"tool_calls": [first]})
        return call

    def _send(self, deltas: list[Delta], call: _StreamedCall, arguments: str) -> bool:
        """Send what ``arguments`` (a prefix of the final text, or all of it)
        adds to what was sent; whether it starts with what was sent."""
        sent = call.sent_text()
        if not arguments.startswith(sent):
            return False
        if len(arguments) > len(sent):
            fragment = arguments[len(sent) :]
            deltas.append({"tool_calls": [{"index": call.index, "function": {"arguments": fragment}}]})
            call.sent.append(fragment)
        return True

    def _send_open_text(self, deltas: list[Delta], text: str) -> None:
        """Send more of the open string's text, escaped as ``json.dumps`` does."""
        assert self._call is not None
        fragment = json.dumps(text, ensure_ascii=False)[1:-1]
        deltas.append({"tool_calls": [{"index": self._call.index, "function": {"arguments": fragment}}]})
        self._call.sent.append(fragment)

    def _reject(self, deltas: list[Delta], reason: str) -> None:
        assert self._call is not None
        deltas.append({"tool_call_errors": [{"index": self._call.index, "id": self._call.id, "reason": reason}]})
        self._call = None


class _ReadBodies:
    """A reader's ``parse_body`` that remembers what it read since the scan
    before last (a call the next scan reads again), and forgets the rest."""

    def __init__(self, parse_body: Callable[[str], Any]) -> None:
        self.parse_body = parse_body
        self.before: dict[str, Any] = {}
        self.now: dict[str, Any] = {}

    def __call__(self, body: str) -> Any:
        read = self.now.get(body, self.before.get(body))
        if read is None:
            try:
                read = self.parse_body(body)
            except Malformed as exc:
                read = exc
        self.now[body] = read
        if isinstance(read, Malformed):
            raise read
        return read

    def forget_unused(self) -> None:
        self.before, self.now = self.now, {}


def _moved(segment: Segment | CallSegment, offset: int) -> Segment | CallSegment:
    """``segment`` of a text that starts at ``offset`` of the whole text."""
    return replace(segment, start=segment.start + offset, end=segment.end + offset) if offset else segment


def _merged(deltas: list[Delta]) -> list[Delta]:
    """Adjacent content deltas as one."""
    merged: list[Delta] = []
    for delta in deltas:
        if merged and "content" in delta and "content" in merged[-1]:
            merged[-1] = {"content": merged[-1]["content"] + delta["content"]}
        else:
            merged.append(delta)
    return merged
