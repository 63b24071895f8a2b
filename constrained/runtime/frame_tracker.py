"""Where a sequence stands in a raw-value dialect's call markup, so the
constraint knows when the next mask is a precomputed row.

:class:`FrameTracker` follows one sequence's tokens through the dialect's
call markup (:class:`~constrained.dialects.raw_values.RawTextSyntax`) and
says when the next mask is such a row (:mod:`.text_masks`): inside a value
whose parameter takes any text, at a character boundary. It also says where
the mask cache may share masks across values (the values that leave no
trace, a number's state, the JSON walk through a value, :mod:`.json_walk`).
Everywhere else the constraint asks llguidance.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from ..caches import Memo
from ..dialects.raw_values import RawTextSyntax, ValueKind
from .json_walk import MARKUP_LIMIT, JsonWalk, WalkMemo, WalkSnapshot
from .text_masks import TextFrameMasks, ValueGuards, utf8_length
from .tracker_lookups import Lookups, tracker_lookups
from .tracker_lookups import prepare_tables as prepare_tables

if TYPE_CHECKING:
    import torch

    from ..compiler import CompiledTools
    from ..tokenizers import Tokenizer


_NO_TOKENS = np.zeros(0, dtype=np.int64)


# Where a sequence stands in the call markup (_NUMBER: a number written in
# the markup, number_opening; _JSON: another value written there, which the
# JSON walk follows).
_OUTSIDE, _MARKUP, _VALUE, _LOST, _NUMBER, _JSON = range(6)
_MARKUP_VALUE_STARTS = frozenset(b"[{tfn")
"""The first bytes of a value written in the markup that is no number."""
_MEMO_LIMIT = 1 << 16
"""The most entries a :class:`TrackerMemo` table keeps (then it starts over):
markup holds the scalar members written before a value, so it is not a
bounded set."""

Openings = tuple[tuple[str | None, str, int] | None, tuple[str | None, str] | None]
"""What a markup opens: a value (the tool it names, if any, its key and the
closing's KMP state after the markup) and a number (tool and key), each or None."""
_NO_MATCH, _UNKNOWN = object(), object()


def _decoded(name: bytes | None) -> str | None:
    return name.decode("utf-8", "replace") if name is not None else None


class TrackerMemo:
    """What the trackers of one tool set look up and learn, shared by its
    requests (most tokens of a call are markup, and matching the dialect's
    patterns byte by byte costs about 1 us a byte):

    - per markup, what it opens (:meth:`FrameTracker._openings`);
    - per markup so far and token, whether the token's bytes open nothing
      (no value, no number, no JSON), so they only extend the markup;
    - per markup, whether it closes a call's arguments, and the tool it names;
    - what the trackers look up per tool and key (a value's kind, its
      guards, a number's automaton), which takes tens of microseconds the
      first time.
    """

    def __init__(self, limit: int = _MEMO_LIMIT) -> None:
        self.openings: Memo[bytes, Openings] = Memo("frame tracker openings", limit)
        self.quiet: Memo[tuple[bytes, int], bool] = Memo("frame tracker quiet tokens", limit)
        self.closes: Memo[bytes, object] = Memo("frame tracker argument closings", limit)
        self.lookups: Lookups | None = None
        """The trackers' arguments (:func:`frame_trackers`), made once (None: the dialect has no raw values)."""
        self.looked_up = False


class TrackerSnapshot(NamedTuple):
    """Where a :class:`FrameTracker` stood (its fields of the same names),
    for rollback."""

    state: int
    tool: str | None
    markup: bytes
    fast: bool
    traceless: bool
    kmp: int
    initial: bool
    need: int
    guards: ValueGuards | None
    tail: bytes
    number_steps: dict[tuple[int, int], int] | None
    number: int | None
    member: tuple[str, str] | None
    closed_member: tuple[str, str] | None
    walk: JsonWalk | None
    walked: WalkSnapshot | None
    pending: tuple[str, str] | None
    value_end: int


_snapshot = tuple.__new__
"""Makes a :class:`TrackerSnapshot` from a tuple: a snapshot is taken at
every token, and the named tuple's own constructor costs 0.4 us more."""


class FrameTracker:
    """Follows one sequence's tokens through a dialect's call markup and
    knows when the next mask is a precomputed row.

    It is fed only tokens the grammar accepted, so the text is always a
    prefix of a valid output; where it cannot be sure of its place (a value
    whose text may hold the closing) it stops tracking until the call ends.
    :meth:`snapshot`/:meth:`restore` follow the constraint's rollback.
    """

    def __init__(
        self,
        syntax: RawTextSyntax,
        tok: Tokenizer,
        masks: TextFrameMasks,
        value_kind: Callable[[str, str], ValueKind],
        guards: Callable[[str], ValueGuards | None] = lambda tool: None,
        values_decide: Callable[[str], bool] = lambda tool: True,
        number_steps: Callable[[str, str], dict[tuple[int, int], int] | None] = lambda tool, key: None,
        members_in_order: bool = False,
        json_walk: Callable[[str, str], JsonWalk | None] = lambda tool, key: None,
        *,
        shared: TrackerMemo,
    ) -> None:
        self.syntax = syntax
        self._memo = shared
        self.masks = masks
        self._table = tok.token_table[0]
        self._open_id = tok.token_id(syntax.call_open)
        self._open_repeats = syntax.open_repeats
        self._close_call_id = tok.token_id(syntax.call_close)
        self._value_kind = value_kind
        self._guards_of = guards
        self._values_decide = values_decide
        self._number_steps_of = number_steps
        self._json_walk = json_walk
        self._walk: JsonWalk | None = None  # the open value's, when it is JSON of a known frame
        self._pending: tuple[str, str] | None = None  # the member whose value the markup may begin next
        self._members_in_order = members_in_order
        self._member: tuple[str, str] | None = None  # the open value's (tool, key), when it alone decides what follows
        self._closed_member: tuple[str, str] | None = None
        self._value_end = 0  # where the markup after the last closed value begins
        self._number_steps: dict[tuple[int, int], int] | None = None  # the open value's, when a plain number
        self._number: int | None = None  # where its text stands in them, while it is only a number
        self._guards: ValueGuards | None = None  # the open value's, when it takes any text
        self._tail = b""  # how much of a guard the value's text ends with
        self._state = _OUTSIDE
        self._tool: str | None = None
        self._markup = b""
        self._fast = False  # the open value takes any text
        self._traceless = False  # what follows the open value does not depend on its text
        self._kmp = 0
        self._initial = False  # the closing matched so far began with the opening
        self._need = 0  # continuation bytes the last character still needs
        self._closings = 0  # values ended so far (not part of the state)

    def snapshot(self) -> TrackerSnapshot:
        return _snapshot(TrackerSnapshot, (
            self._state, self._tool, self._markup, self._fast, self._traceless, self._kmp, self._initial, self._need,
            self._guards, self._tail, self._number_steps, self._number, self._member, self._closed_member,
            self._walk, self._walk.snapshot() if self._walk is not None else None, self._pending, self._value_end))

    def restore(self, snapshot: TrackerSnapshot) -> None:
        (self._state, self._tool, self._markup, self._fast, self._traceless, self._kmp, self._initial,
         self._need, self._guards, self._tail, self._number_steps, self._number, self._member,
         self._closed_member, self._walk, walked, self._pending, self._value_end) = snapshot
        if self._walk is not None:
            assert walked is not None
            self._walk.restore(walked)

    @property
    def walk(self) -> JsonWalk | None:
        """The walk through the open value, when it is JSON of a known frame
        (:mod:`.json_walk`): where its free leaves stand."""
        return self._walk

    @property
    def in_any_text_value(self) -> bool:
        """Whether the text stands inside a value of any text (whose
        content the mask cache does not key on)."""
        return self._state == _VALUE and self._fast

    @property
    def in_traceless_value(self) -> bool:
        """Whether the text stands inside a value that leaves no trace once
        closed: what follows it depends on its closing token, not on its
        text (a value of any text; a typed value of a tool whose arguments
        are one object, so no value picks among parameter sets)."""
        return (self._state == _VALUE and self._traceless) or self._state in (_NUMBER, _JSON)

    @property
    def number_state(self) -> int | None:
        """Inside a value that leaves no trace and takes any JSON number
        (no bounds): the state of its text in the number's automaton, while
        the text is only a number (else None). Texts in one state have one
        mask: the digits written do not matter."""
        return self._number if self._state in (_VALUE, _NUMBER) else None

    @property
    def open_member(self) -> tuple[str, str] | None:
        """The tool and key of the open value, when what follows it depends
        on that key alone (as :attr:`closed_member` says once it closes)."""
        return self._member

    @property
    def closed_member(self) -> tuple[str, str] | None:
        """The tool and key of the value closed last, when what follows it
        depends on that key alone: the tool's arguments are one object whose
        members the grammar takes in a fixed order (not ``key_order="any"``),
        so after a key's value come the members after it, whichever came
        before."""
        return self._closed_member

    @property
    def markup_after_member(self) -> tuple[str, str, bytes] | None:
        """In the markup after a :attr:`closed_member`: its tool and key and
        the markup's bytes since its value ended, which with the last token
        decide where the grammar stands (the members come in a fixed
        order), whatever ended the value; else None."""
        if self._state != _MARKUP or self._closed_member is None:
            return None
        return (*self._closed_member, self._markup[self._value_end :])

    @property
    def closed_arguments(self) -> str | None:
        """The tool whose call's arguments the markup has just closed (the
        dialect's ``arguments_close``, nothing after it yet), else None."""
        closing = self.syntax.arguments_close
        if closing is None or self._state != _MARKUP:
            return None
        named = self._memo.closes.table.get(self._markup, _UNKNOWN)
        if named is _UNKNOWN:
            match = closing.fullmatch(self._markup)
            named = self._memo.closes.learn(self._markup, _NO_MATCH if match is None else _decoded(match.group("tool")))
        if named is _NO_MATCH:
            return None
        return named if named is not None else self._tool  # type: ignore[return-value]

    @property
    def values_closed(self) -> int:
        """How many values the tracker has seen closed (it only grows)."""
        return self._closings

    @property
    def in_text_frame(self) -> bool:
        """Whether the next mask is a precomputed row (:meth:`fill`)."""
        return self._state == _VALUE and self._fast and self._need == 0

    def fill(self, row: np.ndarray, crossing: Callable[[int, list[int]], tuple[np.ndarray, np.ndarray]],
             held: object = None) -> tuple[torch.Tensor | None, np.ndarray | None]:
        """Write the mask into ``row`` (``uint32`` words); return the tokens
        it forbids when they are exactly the precomputed ones (else None),
        and the precomputed array ``row`` now equals (None when the step
        added or took tokens). ``crossing(state, tokens)`` gives those of
        ``tokens`` the grammar allows, as mask words and their bits: they
        end the value from the closing's state ``state`` and go on past it. ``held``: an array ``row`` is
        known to equal (then it is not copied again when the mask is that
        array)."""
        masks, state = self.masks, self._kmp
        written = masks.written[state]
        if held is not written:
            masks.write(row, state)
        forbidden: torch.Tensor | None = None
        equals: np.ndarray | None = None
        if masks.close_token is not None or (self._initial and not self.syntax.close_at_start) or not (
            masks.completing[state] or masks.crossing[state]
        ):
            forbidden, equals = masks.forbidden(state), written
        else:
            for token in masks.completing[state]:
                row[token >> 5] |= np.uint32(1 << (token & 31))
            candidates = masks.crossing[state]
            if candidates:
                words, bits = crossing(state, candidates)
                if len(words):
                    row[words] |= bits
        bad = self._guards.bad(self._tail, state) if self._guards is not None else _NO_TOKENS
        if bad.size:  # tokens that would complete a guard
            np.bitwise_and.at(row, bad >> 5, ~(np.uint32(1) << (bad & 31).astype(np.uint32)))
            return None, None
        return forbidden, equals

    def closing_state_after(self, data: bytes) -> int | None:
        """The closing's KMP state once ``data`` is written as the open
        value's text from here; None where ``data`` would complete the
        closing, or leave it matched from the value's opening (where
        :meth:`fill` asks for no crossing tokens)."""
        transitions, done = self.masks.transitions, len(self.masks.close)
        state, initial = self._kmp, self._initial
        for byte in data:
            step = transitions[state][byte]
            initial, state = initial and step == state + 1, step
            if state == done:
                return None
        return None if initial and not self.syntax.close_at_start else state

    def feed(self, token: int) -> None:
        """Advance past ``token``, which the grammar accepted."""
        if token == self._open_id and (self._state == _OUTSIDE or not self._open_repeats):
            self._state, self._tool, self._markup = _MARKUP, None, b""
            self._number_steps = self._number = self._member = self._closed_member = self._walk = self._pending = None
            return
        if token == self._close_call_id:
            self._state, self._walk = _OUTSIDE, None
            return
        if self._state in (_OUTSIDE, _LOST):
            return
        if self._state == _JSON:
            self._follow_json(self._table[token], token)
            return
        if self._number is not None and self._state == _VALUE:
            self._number = self._number_after(self._table[token])
        if self._walk is not None and self._state == _VALUE:
            self._walk.feed(self._table[token], token)
        masks = self.masks
        if self._state == _VALUE and masks.trailing[token] != 255:
            if masks.neutral[token]:  # no byte of the closing: back to state 0
                self._kmp, self._initial, self._need = 0, False, masks.trailing[token]
                self._guard(self._table[token])
                return
            step = masks.steps.get((self._kmp, token))
            if step is not None:
                self._initial = self._initial and step == self._kmp + len(self._table[token])
                self._kmp, self._need = step, masks.trailing[token]
                self._guard(self._table[token])
                return
            before, closings = self._kmp, self._closings
            self._feed_bytes(self._table[token])
            if self._closings == closings:  # the token stayed inside the value
                masks.steps[before, token] = self._kmp
            return
        if self._state == _VALUE and self.masks.close_token is not None:
            if token == self.masks.close_token:
                self._end_value()
            else:
                self._track_utf8(self._table[token])
                self._guard(self._table[token])
            return
        if self._state == _MARKUP and self.extend_markup(token):
            return
        self._feed_bytes(self._table[token])

    def extend_markup(self, token: int) -> bool:
        """Advance past ``token`` when it only extends the call's markup
        (most tokens of a call): no value, number or JSON opens in it and it
        is no call marker, so nothing the tracker tells changes but the
        markup's text. Else do nothing and return False (:meth:`feed` then
        follows it)."""
        if self._state != _MARKUP or self._pending is not None or self._number_steps is not None \
                or token == self._open_id or token == self._close_call_id:
            return False
        key = (self._markup, token)
        quiet = self._memo.quiet.table.get(key)
        if quiet is None:
            quiet = self._memo.quiet.learn(key, self._opens_nothing(self._table[token]))
        if quiet:
            self._markup += self._table[token]
        return quiet

    def _opens_nothing(self, data: bytes) -> bool:
        """Whether ``data`` fed in the markup only extends it: no byte ends
        markup that opens a value or a number (what :meth:`_feed_bytes`
        would then do at each byte is append it)."""
        markup = self._markup
        for position in range(len(data)):
            markup += data[position : position + 1]
            if len(markup) > MARKUP_LIMIT or self._openings(markup) != (None, None):
                return False
        return True

    def _number_after(self, data: bytes) -> int | None:
        state: int | None = self._number
        steps = self._number_steps
        assert steps is not None
        for byte in data:
            state = steps.get((state, byte))  # type: ignore[arg-type]
            if state is None:
                return None
        return state

    def _guard(self, data: bytes) -> None:
        if self._guards is not None:
            self._tail = self._guards.advance(self._tail, data)

    def _feed_bytes(self, data: bytes) -> None:
        transitions, done = self.masks.transitions, len(self.masks.close)
        for position, byte in enumerate(data):
            if self._state == _VALUE:
                state = transitions[self._kmp][byte]
                self._initial = self._initial and state == self._kmp + 1
                self._kmp = state
                if state == done:
                    self._end_value()
                    continue
                self._track_utf8(data[position : position + 1])
                self._guard(data[position : position + 1])
            elif self._state == _NUMBER:
                assert self._number_steps is not None
                step = self._number_steps.get((self._number, byte))  # type: ignore[arg-type]
                self._markup += data[position : position + 1]
                if step is not None:
                    self._number = step
                    continue
                self._end_value(self._markup, len(self._markup) - 1)  # the byte ended it; the markup goes on
                self._open_value()
            elif self._state == _MARKUP:
                if self._pending is not None:  # a value the JSON walk follows may start here
                    member, self._pending = self._pending, None
                    walk = self._json_walk(*member) if byte in _MARKUP_VALUE_STARTS else None
                    if walk is not None:
                        self._state, self._walk = _JSON, walk
                        self._follow_json(data[position:])
                        return
                if self._number_steps is not None:  # a number may start here
                    step = self._number_steps.get((0, byte))
                    if step is not None:
                        self._state, self._number = _NUMBER, step
                        self._markup += data[position : position + 1]
                        continue
                    self._number_steps = self._number = None
                self._markup += data[position : position + 1]
                if len(self._markup) > MARKUP_LIMIT:
                    self._state = _LOST
                    return
                self._open_value()
                if self._walk is not None:
                    self._walk.feed(data[position + 1 :])
            else:
                return

    def _follow_json(self, data: bytes, token: int | None = None) -> None:
        """Feed a value written in the markup to its walk; the bytes after
        its end go on as markup."""
        walk = self._walk
        assert walk is not None
        walk.feed(data, token)
        if walk.ended is not None:
            self._end_value()
            self._feed_bytes(data[walk.ended :])

    def _openings(self, markup: bytes) -> Openings:
        """What ``markup`` opens, when the dialect's patterns match it whole
        (:data:`Openings`); learned once per tool set."""
        found = self._memo.openings.table.get(markup)
        if found is None:
            opened = number = None
            match = self.syntax.opening.fullmatch(markup)
            if match is not None:
                # How much of the closing the markup ends with: its last bytes
                # tell (the markup may hold whole closings, DSML's).
                state, close = 0, self.masks.close
                for byte in markup[max(0, len(markup) - len(close) + 1) :] if close else b"":
                    state = self.masks.transitions[state][byte]
                opened = (_decoded(match.group("tool")), match.group("key").decode("utf-8", "replace"), state)
            match = self.syntax.number_opening.fullmatch(markup) if self.syntax.number_opening else None
            if match is not None:
                number = (_decoded(match.group("tool")), match.group("key").decode("utf-8", "replace"))
            found = self._memo.openings.learn(markup, (opened, number))
        return found

    def _open_value(self) -> None:
        opened, number = self._openings(self._markup)
        if opened is None:
            self._open_number(number)
            return
        tool, key, state = opened
        if tool is not None:
            self._tool = tool
        kind = ValueKind.UNTRACKED if self._tool is None else self._value_kind(self._tool, key)
        if self._tool is None or kind is ValueKind.UNTRACKED or (kind is ValueKind.OTHER and self.syntax.json_may_hold_close):
            self._state = _LOST
            return
        self._fast = kind is ValueKind.ANY_TEXT
        self._traceless = self._fast or not self._values_decide(self._tool)
        self._number_steps = self._number_steps_of(self._tool, key) if self._traceless and not self._fast else None
        self._member = self._in_order(self._tool, key)
        self._number = None if self._number_steps is None else 0
        # JSON in the value's text (not in a dialect that writes values in its markup, whose walks start there).
        self._walk = self._json_walk(self._tool, key) if self._traceless and not self._fast \
            and self._number_steps is None and self.syntax.number_opening is None else None
        self._guards = self._guards_of(self._tool) if self._fast else None
        self._tail = self._guards.initial if self._guards is not None else b""
        self._state, self._kmp, self._initial, self._need = _VALUE, state, state > 0, 0

    def _open_number(self, number: tuple[str | None, str] | None) -> None:
        """Where the markup may go on with a top-level number that leaves no
        trace (``number_opening``, which matched ``number``: its tool and
        key): ready to follow it from its first byte."""
        if number is None:
            return
        tool, key = number
        if tool is not None:
            self._tool = tool
        if self._tool is not None and not self._values_decide(self._tool):
            self._number_steps = self._number_steps_of(self._tool, key)
            self._number = None if self._number_steps is None else 0
            self._member = self._in_order(self._tool, key)
            self._pending = (self._tool, key) if self._number_steps is None else None

    def _in_order(self, tool: str, key: str) -> tuple[str, str] | None:
        return (tool, key) if self._members_in_order and not self._values_decide(tool) else None

    def _end_value(self, markup: bytes = b"", end: int | None = None) -> None:
        """Close the open value; ``markup``: what the markup after it holds
        so far (a number written in the markup keeps the markup before it)."""
        self._state, self._markup = _MARKUP, markup
        self._number_steps = self._number = self._walk = None
        self._closed_member, self._member = self._member, None
        self._value_end = len(markup) if end is None else end
        self._closings += 1

    def _track_utf8(self, data: bytes) -> None:
        for byte in data:
            if byte < 0x80:
                self._need = 0
            elif byte >= 0xC0:
                self._need = utf8_length(byte) - 1
            elif self._need:
                self._need -= 1


def frame_trackers(compiled: CompiledTools, count: int, memo: WalkMemo | None = None,
                   shared: TrackerMemo | None = None) -> list[FrameTracker] | None:
    """One tracker per sequence for ``compiled``, or ``None`` when its
    dialect has no raw-text values; with ``memo`` (the tool set's), they
    walk its JSON values (:mod:`.json_walk`); ``shared``: the tool set's
    :class:`TrackerMemo` (else one for these trackers)."""
    shared = shared if shared is not None else TrackerMemo()
    if not shared.looked_up:
        shared.lookups, shared.looked_up = tracker_lookups(compiled, memo), True
    found = shared.lookups
    return None if found is None else [FrameTracker(*found, shared=shared) for _ in range(count)]
