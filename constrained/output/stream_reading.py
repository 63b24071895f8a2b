"""What the stream parser reads ahead of a call's end: where a call may
open, and the part of an open call's ``arguments`` text already certain.

Kept apart from :mod:`.stream`, which decides when to read and what to
send, because this part only reads: the dialect's markers and a call's
reading so far.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..dialects.base import Dialect
from ..dialects.segments import CallSegment, Partial
from ..frames.accepts import member_frames
from ..frames.model import Frame
from ..frames.toolset import NormalizedTool
from ..frames.types import json_types
from .parse import CallRejected, candidate_branches, member_frame, read_value


@dataclass
class OpenCall:
    """The reading of the call being written (opened with the dialect's
    ``call_open``, not settled), kept from feed to feed: a feed reads on
    from where the last reading ended when it stopped in a value it can
    follow, else from the end of its last complete pair."""

    start: int
    body: int
    reading: Partial = field(default_factory=Partial)
    at: int = -1
    """Where the text the reading read starts (its offsets count from here)."""
    read: int = -1
    """Where it ends."""
    closed: bool = False
    """Whether the call's closing marker is in the text."""
    quiet: bool = False
    """Whether nothing more streams from it before it settles (an undeclared
    tool, malformed markup, a member that will not validate)."""
    members: str = "{"
    """The arguments text of the reading's first ``count`` pairs."""
    count: int = 0
    keys: set[str] = field(default_factory=set)
    shape: tuple[int, str | None, int] | None = None
    """The pairs, open key and open text length of the reading last streamed."""
    streams_open: bool = False
    """Whether the reading's open string streams (its text so far was sent)."""

    def __post_init__(self) -> None:
        self.at = self.read = self.body


def arguments_prefix(tool: NormalizedTool, call: OpenCall, python_literals: bool) -> str | None:
    """The part of the final ``arguments`` text already certain (the
    reading's complete pairs, each serialized once, then the open
    string's key and text so far), or ``None`` when something read so
    far will not validate."""
    if len(Dialect.argument_objects(tool)) > 1:
        return _branch_prefix(tool, call, python_literals)
    root = tool.schema.resolve(tool.root)
    reading = call.reading
    try:
        for key, value in reading.pairs[call.count :]:
            frame = member_frame(root, key)
            if frame is None or key in call.keys:
                return None
            call.keys.add(key)
            typed = read_value(value, [frame], tool, key, python_literals)
            member = f"{json.dumps(key, ensure_ascii=False)}: {json.dumps(typed, ensure_ascii=False)}"
            call.members += f", {member}" if call.count else member
            call.count += 1
    except CallRejected:
        return None
    frame = member_frame(root, reading.open_key) if reading.open_key is not None else None
    return _with_open_string(tool, call, [frame] if frame is not None else [])


def _branch_prefix(tool: NormalizedTool, call: OpenCall, python_literals: bool) -> str | None:
    """:func:`arguments_prefix` for parameters that are a union of
    parameter sets, where a raw value's type may depend on keys not read
    yet (a discriminator after it): a pair is certain once every set the
    pairs read so far leave possible (:func:`candidate_branches`, among
    which is the one the final parse reads the call by) reads it the
    same; the pairs stream in order up to the first that is not. The
    open string streams only after every pair, and only while every
    possible set that has its key types it a string."""
    reading = call.reading
    keys = [key for key, _ in reading.pairs]
    if len(set(keys)) != len(keys):
        return None
    literals = python_literals
    possible = candidate_branches(tool, reading.pairs, literals)
    if not possible:
        return None
    try:
        for key, value in reading.pairs[call.count :]:
            texts = {
                json.dumps(read_value(value, frames, tool, key, literals), ensure_ascii=False)
                for branch in possible
                if (frames := member_frames(branch, key))
            }
            if len(texts) != 1:
                break
            member = f"{json.dumps(key, ensure_ascii=False)}: {texts.pop()}"
            call.members += f", {member}" if call.count else member
            call.count += 1
    except CallRejected:
        return None
    open_key = reading.open_key
    frames = []
    if call.count == len(keys) and open_key is not None and open_key not in keys:
        frames = [found[0] for branch in possible if (found := member_frames(branch, open_key))]
    return _with_open_string(tool, call, frames)


def _with_open_string(tool: NormalizedTool, call: OpenCall, frames: list[Frame]) -> str:
    """The arguments text of the call's complete pairs and, when the
    reading stopped in a value that all of ``frames`` (the open key's)
    type a string, that string's text as it stands."""
    reading = call.reading
    definitions = tool.schema.definitions
    call.streams_open = (
        reading.open_key is not None
        and reading.open_text is not None
        and bool(frames)
        and all(json_types(frame, definitions) == {"string"} for frame in frames)
    )
    if not call.streams_open:
        return call.members
    separator = ", " if call.count else ""
    escaped = json.dumps(reading.open_text, ensure_ascii=False)[:-1]
    return f"{call.members}{separator}{json.dumps(reading.open_key, ensure_ascii=False)}: {escaped}"


def reasoning_markers(reader: Dialect) -> tuple[str, ...]:
    """The reasoning markers at which plain text may turn into reasoning
    (an interleaved block's opening, a lone closing)."""
    block = reader.reasoning_block()
    if block is None:
        return ()
    return ((block.opening,) if block.interleaved else ()) + ((block.closing,) if block.lone_closing else ())


def markup_markers(reader: Dialect) -> tuple[str, ...]:
    """The texts a calls section's markup may start with, where the dialect
    writes one, and the markers of framed messages (a call's closing among
    them: outside a call it is markup too): text ending in the start of one
    waits, as it may turn into markup (the scan reads the lead and inner
    text only where they are)."""
    section, messages = reader.markup.section, reader.markup.messages
    framing = () if messages is None else (*messages.call_ends(reader.markup), messages.recipient)
    if section is None:
        return framing
    return (section.lead + section.opening, section.opening, section.inner + section.closing, section.closing, *framing)


def call_openings(reader: Dialect, tools: Mapping[str, NormalizedTool]) -> tuple[str, ...]:
    """The texts at which the scan may start reading a call: the dialect's
    call opening, and where it reads a call whose opening is missing (drift:
    qwen3_coder's bare ``<function=NAME>``), the shortest start of each
    tool's call body that the scan already reads as a call."""

    def call_in(text: str) -> CallSegment | None:
        return next((s for s in reader.scan(text) if isinstance(s, CallSegment)), None)

    openings = {reader.markup.open}
    for tool in tools.values():
        rendered = reader.render_call(tool, {}, "trained")
        body = rendered[len(reader.markup.open) :] if rendered.startswith(reader.markup.open) else ""
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
