"""A row's way along its tool set's mask cache (:mod:`.mask_cache`): after
each token it accepts, the node whose mask the row needs next.

A value that leaves no trace once closed is skipped: the node after it
hangs off the node where it opened, by its closing token. Inside it, a
value of any text has no node (its masks are precomputed rows); a typed
value's nodes are keyed by its tokens, from the node where it opened, and
a number's text by its state (after ``12`` and ``345`` alike, llguidance's
lexer and parser stand in the same place); so is a free leaf inside JSON
(:meth:`CacheWalk._in_json`). A call's opening and closing tokens lead to
one node each, whichever call it is (:func:`call_marks`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..dialects import get_dialect
from ..dialects.base import Markers
from ..grammar.syntax import NotWalkable
from .arguments_tracker import ArgumentsTracker, arguments_trackers
from .frame_tracker import FrameTracker, frame_trackers
from .json_frames import walk_shape
from .json_walk import BACK, MARK, JsonWalk
from .mask_cache import (
    BYTE_LABELS,
    CLOSED_CALL,
    LEAF_LABELS,
    OPENED_CALL,
    MaskCache,
    MaskNode,
    allows_other_than,
    token_words,
)
from .row import HistoryEntry, Row, new_entry

if TYPE_CHECKING:
    from ..compiler import CompiledTools
    from ..tokenizers import Tokenizer

Words = tuple[np.ndarray, np.ndarray]
"""Mask words and the bits that allow tokens in each (:func:`.mask_cache.token_words`)."""
_NO_WORDS = token_words([])


class CacheWalk:
    """Moves rows of one tool set along its mask cache (``cache``; None:
    masks are not kept, and every row's node stays None while its
    follower is still fed)."""

    def __init__(self, compiled: CompiledTools, cache: MaskCache | None) -> None:
        self.cache = cache
        self.tokenizer: Tokenizer = compiled.tokenizer
        self.end_ids = frozenset(compiled.tokenizer.eos_token_ids)
        self.marks = call_marks(compiled) if cache is not None else {}

    def advance(self, r: Row, token: int) -> None:
        """Move the row's follower and its place in the cache past an
        accepted ``token``, keeping where they stood in its history."""
        follower = r.follower
        r.history.append(new_entry(HistoryEntry, (token, follower.snapshot() if follower is not None else None, r.node,
                                                  r.value_start, r.call_node, r.skeleton, r.kept)))
        mark = self.marks.get(token)
        if mark is not None:
            self._at_call_mark(r, mark, token)
            return
        tracker = r.tracker
        if tracker is None:
            self._outside_values(r, follower, token)  # type: ignore[arg-type]
        elif tracker.extend_markup(token):  # most tokens: nothing opens or closes in them
            r.node = self._past_markup(tracker, r.call_node, r.node, token)
        else:
            self._through_values(r, tracker, token)

    def _at_call_mark(self, r: Row, mark: int, token: int) -> None:
        """A call's opening or closing token: one node each from the root."""
        if r.follower is not None:
            r.follower.feed(token)
        assert self.cache is not None
        r.node, r.value_start = self.cache.root.child(mark), None
        if mark == OPENED_CALL:
            r.call_node = r.node

    def _outside_values(self, r: Row, arguments: ArgumentsTracker | None, token: int) -> None:
        """A dialect without raw values: the token's node, inside JSON
        arguments by their skeleton."""
        if arguments is None:
            r.node = r.node.child(token) if r.node is not None else None
            return
        walk = arguments.walk
        arguments.feed(token)
        r.node = self._in_json(r, arguments.walk, arguments.walk is walk, r.node, token)

    def _through_values(self, r: Row, tracker: FrameTracker, token: int) -> None:
        """A token that may open, stay in or close a value that leaves no trace."""
        inside, text, closed = tracker.in_traceless_value, tracker.in_any_text_value, tracker.values_closed
        walk = tracker.walk
        tracker.feed(token)
        closed = tracker.values_closed - closed
        if inside and closed == 0 and tracker.in_traceless_value:  # still inside the value
            if not text:
                self._inside_value(r, tracker, walk, token)
            return
        before = r.node
        node = self._past_value(r, tracker, inside, closed, token)
        start = r.value_start
        if tracker.in_traceless_value:  # the token opened one
            node, start = self._value_opened(r, tracker, inside, before, node, token)
        r.node, r.value_start = node, start

    def _inside_value(self, r: Row, tracker: FrameTracker, walk: JsonWalk | None, token: int) -> None:
        """A token inside a typed value: a number's text by its state, JSON by its skeleton."""
        number = tracker.number_state
        if number is not None:  # a number's text: one node per state of its automaton
            start = r.value_start
            r.node = start.child(LEAF_LABELS + number) if start is not None else None
        else:
            r.node = self._in_json(r, tracker.walk, tracker.walk is walk, r.node, token)

    def _past_value(self, r: Row, tracker: FrameTracker, inside: bool, closed: int, token: int) -> MaskNode | None:
        """The node after ``token``, which closed the open value (``inside``)
        or was fed in the markup."""
        call = r.call_node
        member = tracker.closed_member if closed == 1 else None
        node: MaskNode | None
        if inside and member is not None and call is not None:
            # What follows depends on the key alone: one node per key and
            # closing token from where the call began, whichever keys came before.
            assert self.cache is not None
            node = call.child(self.cache.label(member)).child(~token)
        elif inside:  # the token closed it (exactly one: else the row stops using the cache)
            start = r.value_start
            node = start.child(~token) if closed == 1 and start is not None else None
        else:
            node = self._past_markup(tracker, call, r.node, token)
        if inside and call is not None and (tool := tracker.closed_arguments) is not None:
            node = self._arguments_closed(call, tool, token)
        return node

    def _value_opened(self, r: Row, tracker: FrameTracker, inside: bool, before: MaskNode | None,
                      node: MaskNode | None, token: int) -> tuple[MaskNode | None, MaskNode | None]:
        """The node after ``token``, which opened a value that leaves no
        trace, and the node its value starts from. Where its member alone
        decides what follows, a number written in the markup (Gemma) and a
        JSON value are keyed from one node per member, whether the token
        also holds the markup before the value (``:[`` against ``:`` then
        ``[-``) or not."""
        call = r.call_node
        opened = tracker.open_member if call is not None and before is not None and not inside else None
        member_node = None
        if opened is not None:
            assert call is not None and self.cache is not None
            member_node = call.child(self.cache.label(("value", *opened)))
        number = tracker.number_state
        if number and not inside and before is not None:
            # It also began a number written in the markup: else keyed
            # from before the token, whatever digit it began with.
            before = member_node or before
            return before.child(LEAF_LABELS + number), before
        if tracker.in_any_text_value:  # its crossing tokens are kept per member where it alone decides them
            return None, member_node or node
        if tracker.walk is not None:  # JSON: its skeleton begins in this token
            return self._in_json(r, tracker.walk, False, before, token, member_node), node
        return node, node

    def _past_markup(self, tracker: FrameTracker, call: MaskNode | None, node: MaskNode | None,
                     token: int) -> MaskNode | None:
        """The row's node after ``token`` from ``node``, the token fed
        outside any value that leaves no trace (in the call's markup, mostly)."""
        if call is not None and (after := tracker.markup_after_member) is not None:
            # The markup after a member's value: keyed by the member and its
            # text since, so calls meet again after values that ended alike
            # in text but not in tokens (a string's delimiter, a number's
            # last digit).
            assert self.cache is not None
            node = call.child(self.cache.label(("markup", *after))).child(token)
        else:
            node = node.child(token) if node is not None else None
        if call is not None and (tool := tracker.closed_arguments) is not None:
            node = self._arguments_closed(call, tool, token)
        return node

    def _arguments_closed(self, call: MaskNode, tool: str, token: int) -> MaskNode:
        """The node after ``token``, which closed the arguments of a call of
        ``tool`` (a token fed in the markup adds to it, so they were not
        closed before): past them the grammar stands in one place, whichever
        members came before; one node per tool and closing token."""
        assert self.cache is not None
        return call.child(self.cache.label(("arguments closed", tool))).child(token)

    def _in_json(self, r: Row, walk: JsonWalk | None, walking: bool, before: MaskNode | None,
                 token: int, member: MaskNode | None = None) -> MaskNode | None:
        """The row's node after ``token`` (from ``before``) inside JSON that
        ``walk`` follows (``walking``: since before the token). From the node
        where the walk began, the nodes follow the value's skeleton byte by
        byte (:attr:`JsonWalk.skeleton`: its text less that of its free
        leaves), then the last token, or inside a free leaf its state: the
        masks depend on the bytes and the last token (:mod:`.mask_cache`),
        and inside a free leaf on neither its text nor how it was cut into
        tokens. So another value with the same skeleton, however its tokens
        fall, finds the same nodes. ``member``: where a value that begins in
        this token is keyed by its member, its skeleton begins there instead."""
        if before is None or walk is None:
            return before.child(token) if before is not None else None
        skeleton = r.skeleton
        if not walking or skeleton is None:
            # The value began in this token: its skeleton from the bytes of the token before it.
            assert self.cache is not None
            if member is not None:
                skeleton = member
            else:
                data = self.tokenizer.token_bytes(token)
                skeleton = before.child(self.cache.label(("value", data[: len(data) - (walk.first_fed or 0)])))
            r.kept = ()
        skeleton = r.skeleton = self._follow_skeleton(r, skeleton, walk.skeleton)
        if not walk.in_leaf:
            return skeleton.child(token)
        state = walk.leaf_state
        return skeleton.child(LEAF_LABELS + state) if state is not None else before.child(token)

    @staticmethod
    def _follow_skeleton(r: Row, skeleton: MaskNode, entries: tuple[int, ...]) -> MaskNode:
        """The node ``entries`` of a skeleton lead to from ``skeleton``:
        bytes, places kept (in ``r.kept``) and returns to them."""
        for entry in entries:
            if entry < MARK:
                skeleton = skeleton.child(BYTE_LABELS + entry)
            elif entry < BACK:  # a place to come back to
                kept = r.kept
                slot = entry - MARK
                r.kept = (*kept[:slot], *(None,) * (slot - len(kept)), skeleton, *kept[slot + 1 :])
            else:
                back = r.kept[entry - BACK]
                assert back is not None
                skeleton = back
        return skeleton

    def goes_on(self, node: MaskNode) -> bool:
        """Whether ``node`` keeps a mask that allows a token other than the
        end tokens (learned once per node)."""
        goes_on = node.goes_on
        if goes_on is None:
            if node.mask is None:
                return False
            goes_on = node.goes_on = allows_other_than(node.mask, self.end_ids)
        return goes_on

    # -- crossing tokens of a value of any text -----------------------------

    def crossing(self, r: Row, state: int, candidates: list[int], caught_up: Callable[[], Any]) -> Words:
        """Those of ``candidates`` the grammar allows, as mask words and
        their bits: tokens that end the row's open value of any text from
        the closing's KMP state ``state`` and go on past the closing. What
        follows such a value does not depend on its text (:mod:`.mask_cache`),
        so they are kept per state with the node where the value opened,
        and one lookup serves a step (GLM's closing has hundreds of
        candidates); else the matcher, once caught up (``caught_up()``: it,
        or None where catching up met a violation), is asked of each."""
        start = r.value_start
        crossings = start.crossings if start is not None else None
        allowed = crossings.get(state) if crossings is not None else None
        if allowed is None:
            matcher = caught_up()
            if matcher is None:  # catching up met a violation: nothing to learn
                return _NO_WORDS
            allowed = _allowed_after(matcher, [], candidates)
            if start is not None:
                if start.crossings is None:
                    start.crossings = {}
                start.crossings[state] = allowed
        return allowed

    def learn_crossings(self, r: Row, start: MaskNode, caught_up: Callable[[], Any]) -> None:
        """At the first step of a value of any text that opened at ``start``,
        where nothing was learned yet: the crossing tokens (:meth:`crossing`)
        of every state of the closing that has some, asked of llguidance
        from here with the closing's first bytes written as the value's
        text (for each state they lead to from here; the others are asked
        when met). Asked when the text first reaches such a state, the
        matcher would first be fed the whole value (about 1 us a token: a
        millisecond at the closing of a long file's content); here it is
        fed the markup before it. The warm-up's calls learn them for the
        values they open."""
        tracker = r.tracker
        assert tracker is not None
        masks = tracker.masks
        start.crossings = {}
        if not any(masks.crossing):
            return
        matcher = caught_up()
        if matcher is None:
            return
        for state, candidates in enumerate(masks.crossing):
            if not candidates or tracker.closing_state_after(masks.close[:state]) != state:
                continue
            text = self.tokenizer.encode(masks.close[:state].decode("utf-8"))
            if matcher.validate_tokens(text) == len(text):
                start.crossings[state] = _allowed_after(matcher, text, candidates)


def _allowed_after(matcher: Any, text: list[int], candidates: list[int]) -> Words:
    """Those of ``candidates`` ``matcher`` accepts after the tokens ``text``
    (not fed), as mask words and their bits."""
    validate = matcher.validate_tokens
    return token_words([token for token in candidates if validate([*text, token]) == len(text) + 1])


def call_marks(compiled: CompiledTools) -> dict[int, int]:
    """The mask cache's labels for the tokens that open and close a call,
    when the dialect's markers are single tokens (else none). Every call of
    a dialect's grammar is one rule between those two tokens, the same for
    a first call and a later one, and the special tokens appear nowhere
    else; so after a call's opening the grammar stands where it stands in
    every call, and after its closing where it stands after every call. One
    node each then serves every call of every tool: the masks that choose
    the tool, and those after a call (another call or the end). Where the
    call's markers are text inside a section of tokens (MiniMax), the
    section's tokens are the marks: the grammar stands in one place after
    each of them in every turn, as the frame tracker's calls run between them."""
    dialect = get_dialect(compiled.dialect)
    markup = dialect.markup
    if markup.messages is not None:
        return {}  # every message's header opens with the call's opening token
    markers, tok = Markers(compiled.tokenizer), compiled.tokenizer
    marked = markup.call_tokens
    opening, closing = map(tok.token_id, marked)
    if opening is None or closing is None or not all(map(markers.is_token, marked)):
        return {}
    return {opening: OPENED_CALL, closing: CLOSED_CALL}


def followers(compiled: CompiledTools, count: int,
              cache: MaskCache | None) -> list[FrameTracker | ArgumentsTracker | None]:
    """What follows each row's markup: frame trackers (raw-value dialects),
    else arguments trackers (arguments as one JSON value, with a cache),
    else nothing."""
    trackers = frame_trackers(compiled, count, cache.walks, cache.trackers) if cache is not None \
        else frame_trackers(compiled, count)
    if trackers is not None:
        return list(trackers)
    arguments = arguments_trackers(compiled, count, cache.walks) if cache is not None else None
    return list(arguments) if arguments is not None else [None] * count


def cache_state(compiled: CompiledTools, cache: MaskCache | None,
                follower: FrameTracker | ArgumentsTracker | None) -> str:
    """How the mask cache serves a constraint whose rows have ``follower``
    (the first row's), in one line (``ToolCallConstraint.cache_state``):
    where values are keyed by their tokens, a call with other values is
    masked by llguidance again, and this says why."""
    if cache is None:
        return "off"
    shape = walk_shape(compiled)
    if isinstance(shape, NotWalkable):
        return f"on, values keyed by their tokens: the JSON walk cannot follow the value syntax ({shape.reason})"
    if follower is None:
        return ("on, values keyed by their tokens: the dialect declares neither raw-text values (raw_text_syntax) "
                "nor where a call's JSON arguments begin (markup.arguments_opening)")
    return "on"
