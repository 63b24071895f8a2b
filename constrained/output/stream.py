"""Streaming: model text in deltas -> OpenAI-style streaming deltas.

``feed`` returns content deltas for text outside calls, a first delta for
each call (index, id, name) and then fragments of its ``arguments``.

**What is settled comes from the dialect's own scan.** At every feed the
whole text so far is scanned (:meth:`Dialect.scan`, the reading
:func:`parse_tool_calls` makes) into reasoning, text and call segments. The
scanners read left to right, so a segment that another one follows is
settled, and a settled call is accepted or rejected exactly as the
non-streaming parser does it (:func:`openai_call`). What is not settled:

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
- everything, while a leading reasoning block may still form. Reasoning is
  not content and is not streamed (it is in
  :attr:`ToolCallStreamParser.result`).

So, for every text and every way of cutting it into pieces, the content
deltas concatenate to exactly ``parse_tool_calls(text).content``, and the
calls streamed and not reported below are exactly its ``tool_calls`` (same
ids; the fragments of a call concatenate to its ``arguments``). No text is
ever lost: a call rejected when it settles (or at ``close()``) comes out as
content, and when it had been streamed (its fragments cannot be taken back),
a ``{"tool_call_errors": [{"index", "id", "reason"}]}`` delta reports it
first. ``close()`` settles everything and sends what was held back;
:attr:`ToolCallStreamParser.result` is then the authoritative
:class:`ParseResult`.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ..dialects import get_dialect
from ..dialects.base import Dialect
from ..dialects.segments import CallSegment, Malformed, Parsed, Partial, Segment, held_back
from ..errors import StreamClosedError
from .parse import (
    CallRejected,
    ParseResult,
    call_id,
    member_frame,
    openai_call,
    parse_tool_calls,
    read_raw,
    usable_tools,
)
from ..frames.toolset import NormalizedTool
from ..frames.types import json_types

Delta = dict[str, Any]


@dataclass
class _StreamedCall:
    start: int
    index: int
    id: str
    sent: str = ""
    seen: bool = True


class ToolCallStreamParser:
    """Incremental :func:`parse_tool_calls` for one model output."""

    def __init__(self, tools: Any, dialect: str) -> None:
        self.dialect = get_dialect(dialect)
        self.tool_set = usable_tools(tools, self.dialect)
        self.tools = self.tool_set.by_name()
        self.text = ""
        self.result: ParseResult | None = None
        self._reader = copy.copy(self.dialect.for_tools(self.tools))
        self._openings = _call_openings(self._reader, self.tools)
        # The whole text is scanned at every feed: its closed calls are read once.
        self._bodies = _ReadBodies(self._reader.parse_body)
        self._reader.parse_body = self._bodies  # type: ignore[method-assign]
        self._left_out = self.tool_set.left_out_by_name()
        self._position = 0  # text before this offset is settled and sent (or part of the open call)
        self._call: _StreamedCall | None = None
        self._streamed = 0

    def feed(self, delta: str) -> list[Delta]:
        """Add model text; return the deltas it settles."""
        if self.result is not None:
            raise StreamClosedError("feed() after close(): the stream's result is final; use a new ToolCallStreamParser for new output")
        self.text += delta
        return self._advance(final=False)

    def close(self) -> list[Delta]:
        """Finish: settle every segment, send what was held back, and report
        streamed calls the complete text rejects."""
        if self.result is not None:
            return []
        deltas = self._advance(final=True)
        self.result = parse_tool_calls(self.text, self.tool_set, self.dialect.name)
        return deltas

    # -- segments --------------------------------------------------------------------

    def _advance(self, *, final: bool) -> list[Delta]:
        deltas: list[Delta] = []
        segments = list(self._reader.scan(self.text))
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
            if settled:
                self._position = segment.end
        if self._call is not None and not self._call.seen:
            # The scan no longer reads a call where one was being streamed
            # (the text there is settled by the segments that cover it now).
            self._reject(deltas, "the call is no longer read as a call")
        return _merged(deltas)

    def _reasoning_may_form(self, segments: list[Segment | CallSegment]) -> bool:
        """Whether the text so far may still open a leading reasoning block
        (then nothing is settled: the whole text may become reasoning)."""
        markers = self.dialect.reasoning_block()
        if markers is None or self._position > 0:
            return False
        opening = markers[0]
        stripped = self.text.lstrip()
        if opening.startswith(stripped):
            return True
        return stripped.startswith(opening) and segments[0].kind != "reasoning"

    def _may_grow(self, segment: Segment | CallSegment) -> bool:
        """Whether the call ``segment``, which text follows, may still take
        that text in: whether the scan reads it longer once the text goes on
        with the call's closing marker (or the rest of one it ends in)."""
        if not isinstance(segment, CallSegment):
            return False
        closing = self.dialect.call_close
        for size in range(len(closing)):
            if self.text.endswith(closing[:size]):
                probe = self._reader.scan(self.text + closing[size:])
                if any(s.start == segment.start and s.end > segment.end for s in probe):
                    return True
        return False

    def _hold(self, segment: Segment) -> int:
        """Where the open text segment may start turning into a call: the
        first call opening in it, or a tail that may be the start of one."""
        text = self.text[segment.start : segment.end]
        cut = min(len(held_back(text, opening)) for opening in self._openings)
        for opening in self._openings:
            found = text.find(opening)
            if found >= 0:
                cut = min(cut, found)
        return segment.start + cut

    def _content(self, deltas: list[Delta], end: int) -> None:
        if end > self._position:
            deltas.append({"content": self.text[self._position : end]})
            self._position = end

    # -- calls -----------------------------------------------------------------------

    def _call_segment(self, deltas: list[Delta], segment: CallSegment, settled: bool) -> None:
        streamed = self._call if self._call is not None and self._call.start == segment.start else None
        if streamed is not None:
            streamed.seen = True
        if not settled:
            partial = self._partial(segment)
            tool = self.tools.get(partial.name or "")
            if tool is not None:
                call = streamed or self._start(deltas, segment.start, tool.name)
                self._send(deltas, call, self._arguments_prefix(tool, partial))
            return
        try:
            accepted = openai_call(segment, self.tools, self.dialect.python_literals, self._left_out)
        except CallRejected as exc:
            if streamed is not None:
                self._reject(deltas, str(exc))
            self._content(deltas, segment.end)
            return
        call = streamed or self._start(deltas, segment.start, accepted["function"]["name"])
        self._send(deltas, call, accepted["function"]["arguments"])
        self._call = None

    def _start(self, deltas: list[Delta], start: int, name: str) -> _StreamedCall:
        call = _StreamedCall(start, self._streamed, call_id(start, name))
        self._streamed += 1
        self._call = call
        first = {"index": call.index, "id": call.id, "type": "function", "function": {"name": name, "arguments": ""}}
        deltas.append({"tool_calls": [first]})
        return call

    def _send(self, deltas: list[Delta], call: _StreamedCall, arguments: str | None) -> None:
        """Send what ``arguments`` (a prefix of the final text, or all of it)
        adds to what was sent."""
        if arguments is not None and arguments.startswith(call.sent) and len(arguments) > len(call.sent):
            fragment = {"index": call.index, "function": {"arguments": arguments[len(call.sent) :]}}
            deltas.append({"tool_calls": [fragment]})
            call.sent = arguments

    def _reject(self, deltas: list[Delta], reason: str) -> None:
        assert self._call is not None
        deltas.append({"tool_call_errors": [{"index": self._call.index, "id": self._call.id, "reason": reason}]})
        self._call = None

    def _partial(self, segment: CallSegment) -> Partial:
        """What the open call shows so far, by the dialect's partial reading
        (nothing for a call that does not start with :attr:`call_open`, or
        whose markup is malformed)."""
        opening, closing = self.dialect.call_open, self.dialect.call_close
        if not segment.text.startswith(opening):
            return Partial()
        body = segment.text[len(opening) :]
        # An unclosed body may end in the first characters of the closing.
        body = body[: -len(closing)] if body.endswith(closing) else held_back(body, closing)
        try:
            return self._reader.partial_body(body)
        except Malformed:
            return Partial()

    def _arguments_prefix(self, tool: Any, partial: Partial) -> str | None:
        """The part of the final ``arguments`` text already certain, or
        ``None`` when something read so far will not validate."""
        root = tool.schema.resolve(tool.root)
        members = []
        seen = set()
        try:
            for key, value in partial.pairs:
                frame = member_frame(root, key)
                if frame is None or key in seen:
                    return None
                seen.add(key)
                typed = value.value if isinstance(value, Parsed) else read_raw(
                    value.text, frame, tool, key, self.dialect.python_literals
                )
                members.append(f"{json.dumps(key, ensure_ascii=False)}: {json.dumps(typed, ensure_ascii=False)}")
        except CallRejected:
            return None
        text = "{" + ", ".join(members)
        if partial.open_key is not None and partial.open_text is not None:
            frame = member_frame(root, partial.open_key)
            if frame is not None and json_types(frame, tool.schema.definitions) == {"string"}:
                separator = ", " if members else ""
                escaped = json.dumps(partial.open_text, ensure_ascii=False)[:-1]
                text += f"{separator}{json.dumps(partial.open_key, ensure_ascii=False)}: {escaped}"
        return text


def _call_openings(reader: Dialect, tools: Mapping[str, NormalizedTool]) -> tuple[str, ...]:
    """The texts at which the scan may start reading a call: the dialect's
    call opening, and where it reads a call whose opening is missing (drift:
    qwen3_coder's bare ``<function=NAME>``), the shortest start of each
    tool's call body that the scan already reads as a call."""

    def call_in(text: str) -> CallSegment | None:
        return next((s for s in reader.scan(text) if isinstance(s, CallSegment)), None)

    openings = {reader.call_open}
    for tool in tools.values():
        rendered = reader.render_call(tool, {}, "trained")
        body = rendered[len(reader.call_open) :] if rendered.startswith(reader.call_open) else ""
        whole = call_in(body)
        if whole is None or any(body.startswith(known, whole.start) for known in openings):
            continue
        low, high = 0, len(body)  # the shortest start read as a call is longer than low, at most high
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (low, middle) if call_in(body[:middle]) is not None else (middle, high)
        call = call_in(body[:high])
        assert call is not None
        openings.add(body[call.start : high])
    return tuple(sorted(openings))


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


def _merged(deltas: list[Delta]) -> list[Delta]:
    """Adjacent content deltas as one."""
    merged: list[Delta] = []
    for delta in deltas:
        if merged and "content" in delta and "content" in merged[-1]:
            merged[-1] = {"content": merged[-1]["content"] + delta["content"]}
        else:
            merged.append(delta)
    return merged
