"""Streaming: model text in deltas -> OpenAI-style streaming deltas.

``feed`` returns content deltas for text outside calls, a first delta for
each call (index, id, name) and then fragments of its ``arguments``. The
fragments of a call concatenate to exactly the ``arguments`` string
:func:`parse_tool_calls` gives for the whole text: the parser serializes
arguments as ``json.dumps`` does, one complete argument after another, and a
string parameter's text streams as it arrives (in every dialect). Other
values are sent once complete.

A call that turns out to be invalid when it ends cannot be taken back: its
fragments have been sent. ``close()`` then reports it (``tool_call_errors``,
by index) and :attr:`ToolCallStreamParser.result` holds the authoritative
:class:`ParseResult`, in which that call is content, as always.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .dialects import get_dialect
from .dialects.segments import Malformed, Parsed, Partial, held_back
from .parse import CallRejected, ParseResult, call_id, member_frame, parse_tool_calls, read_raw, usable_tools
from .schema.types import json_types

Delta = dict[str, Any]


@dataclass
class _OpenCall:
    start: int
    index: int | None = None
    sent: str = ""


class ToolCallStreamParser:
    """Incremental :func:`parse_tool_calls` for one model output."""

    def __init__(self, tools: Any, dialect: str) -> None:
        self.dialect = get_dialect(dialect)
        self.tool_set = usable_tools(tools, self.dialect)
        self.tools = self.tool_set.by_name()
        self.text = ""
        self.result: ParseResult | None = None
        self._position = 0
        self._call: _OpenCall | None = None
        self._streamed: list[tuple[int, str, int]] = []
        self._reasoning_checked = False

    def feed(self, delta: str) -> list[Delta]:
        """Add model text; return the deltas it completes."""
        if self.result is not None:
            raise ValueError("feed() after close()")
        self.text += delta
        return self._advance(final=False)

    def close(self) -> list[Delta]:
        """Finish: flush held-back text, and report streamed calls the
        complete text rejects."""
        if self.result is not None:
            return []
        deltas = self._advance(final=True)
        self.result = parse_tool_calls(self.text, self.tool_set, self.dialect.name)
        accepted = {call["id"] for call in self.result.tool_calls}
        rejected = [
            {"index": index, "id": identifier, "reason": self._reason(start)}
            for index, identifier, start in self._streamed
            if identifier not in accepted
        ]
        if rejected:
            deltas.append({"tool_call_errors": rejected})
        return deltas

    def _reason(self, start: int) -> str:
        assert self.result is not None
        offset = len(self.text[:start].encode("utf-8"))
        return next((e.reason for e in self.result.errors if e.span[0] == offset), "the call is not valid")

    # -- scanning ----------------------------------------------------------------

    def _advance(self, *, final: bool) -> list[Delta]:
        deltas: list[Delta] = []
        if not self._reasoning_checked and not self._skip_reasoning(final):
            return deltas
        opening, closing = self.dialect.call_open, self.dialect.call_close
        while True:
            if self._call is None:
                start = self.text.find(opening, self._position)
                if start < 0:
                    pending = self.text[self._position :]
                    end = len(self.text) if final else self._position + len(held_back(pending, opening))
                    self._content(deltas, end)
                    return deltas
                self._content(deltas, start)
                self._call = _OpenCall(start)
            call = self._call
            body_start = call.start + len(opening)
            close = self.text.find(closing, body_start)
            # An unclosed body may end in the first characters of the closing.
            body = self.text[body_start:close] if close >= 0 else held_back(self.text[body_start:], closing)
            self._stream_arguments(deltas, call, self._partial(body, complete=close >= 0), complete=close >= 0)
            if close < 0:
                return deltas
            self._position = close + len(closing)
            self._call = None

    def _skip_reasoning(self, final: bool) -> bool:
        """Move past a leading reasoning block once it is complete (it is
        reported in the result, not streamed). False while undecided."""
        markers = self.dialect.reasoning_block()
        if markers is None:
            self._reasoning_checked = True
            return True
        opening, closing = markers
        stripped = self.text.lstrip()
        if not final and opening.startswith(stripped):
            return False
        if stripped.startswith(opening):
            end = self.text.find(closing, len(self.text) - len(stripped) + len(opening))
            if end < 0:
                if not final:
                    return False
            else:
                self._position = end + len(closing)
        self._reasoning_checked = True
        return True

    def _content(self, deltas: list[Delta], end: int) -> None:
        if end > self._position:
            deltas.append({"content": self.text[self._position : end]})
            self._position = end

    def _partial(self, body: str, *, complete: bool) -> Partial:
        """What the call shows so far; nothing more once it is malformed."""
        try:
            if complete:
                name, pairs = self.dialect.for_tools(self.tools).parse_body(body)
                return Partial(name, pairs)
            return self.dialect.for_tools(self.tools).partial_body(body)
        except Malformed:
            return Partial()

    # -- arguments -------------------------------------------------------------------

    def _stream_arguments(self, deltas: list[Delta], call: _OpenCall, partial: Partial, *, complete: bool) -> None:
        tool = self.tools.get(partial.name or "")
        if tool is None:
            return
        if call.index is None:
            call.index = len(self._streamed)
            identifier = call_id(call.start, tool.name)
            self._streamed.append((call.index, identifier, call.start))
            deltas.append(
                {
                    "tool_calls": [
                        {
                            "index": call.index,
                            "id": identifier,
                            "type": "function",
                            "function": {"name": tool.name, "arguments": ""},
                        }
                    ]
                }
            )
        prefix = self._arguments_prefix(tool, partial, complete)
        if prefix is not None and prefix.startswith(call.sent) and len(prefix) > len(call.sent):
            deltas.append({"tool_calls": [{"index": call.index, "function": {"arguments": prefix[len(call.sent) :]}}]})
            call.sent = prefix

    def _arguments_prefix(self, tool: Any, partial: Partial, complete: bool) -> str | None:
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
        elif complete:
            text += "}"
        return text
