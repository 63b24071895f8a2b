"""The constraint at sampling time: one matcher per sequence, one bitmask.

:class:`ToolCallConstraint` holds a batch of llguidance matchers made from
one :class:`~constrained.compiler.CompiledTools`. Every buffer it needs is
allocated on the first :meth:`~ToolCallConstraint.mask_logits` call, sized
by the logits it is given; after that a decoding step allocates no tensor on
CPU or GPU. The host bitmask is filled from precomputed raw-text rows, from
the tool set's mask cache or by llguidance, and
:meth:`~ToolCallConstraint.apply` turns it into ``+inf``/``-inf`` per token
in place (:mod:`.logits_mask`), with fixed shapes, so the apply step can be
captured in a CUDA graph.

A token the grammar does not allow (a sampler that ignored the mask, a
bug) never wedges a sequence: its constraint is released (or, with
``on_violation="stop"``, only end-of-generation tokens stay allowed), the
event is recorded in :attr:`~ToolCallConstraint.events`, and the mask never
leaves a row without an allowed token.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from enum import Enum
from functools import partial
from typing import TYPE_CHECKING, Any, Literal
from collections.abc import Sequence

import numpy as np

from ..dialects import get_dialect
from ..dialects.base import Markers
from ..errors import ArgumentError, ConstraintError, GenerationError
from .budget import CallBudget
from .frame_tracker import FrameTracker, frame_trackers
from .logits_mask import MaskBuffers, apply_mask
from .text_masks import ALL_ALLOWED
from .arguments_tracker import ArgumentsTracker, arguments_trackers
from .json_walk import BACK, MARK, JsonWalk
from .mask_cache import (BYTE_LABELS, CLOSED_CALL, LEAF_LABELS, NOTHING, OPENED_CALL, MaskCache, MaskNode,
                         allows_other_than, mask_cache, single_token, token_words, write_token)

if TYPE_CHECKING:
    import torch

    from ..compiler import CompiledTools

logger = logging.getLogger(__name__)

MISSES_IN_A_ROW = 32
"""After this many cache misses in a row whose masks allow several tokens,
in text the cache keys on (like a long string under a pattern), a sequence
stops keeping and looking up masks."""

OnViolation = Literal["unconstrained", "stop"]
ON_VIOLATION = ("unconstrained", "stop")


class RowState(Enum):
    """Where one sequence of the batch stands."""

    ACTIVE = "active"
    """The grammar governs the next token."""
    FINISHED = "finished"
    """The grammar is complete; only end-of-generation tokens are allowed."""
    RELEASED = "released"
    """A forbidden token was fed; the sequence continues unconstrained."""
    STOPPED = "stopped"
    """A forbidden token was fed; only end-of-generation tokens are allowed."""


@dataclass(frozen=True)
class ConstraintEvent:
    """A token the grammar did not allow was fed to sequence ``row``, after
    ``position`` tokens of its output; the row went to ``state``."""

    row: int
    position: int
    token_id: int
    token: str
    state: RowState

    def __str__(self) -> str:
        return (
            f"sequence {self.row}: token {self.token_id} ({self.token!r}) at output position "
            f"{self.position} is not allowed by the grammar; the sequence is now {self.state.value}"
        )


PROMPT_TAIL = 16
"""Tokens at a prompt's end that say whether it opened a reasoning block."""


def compiled_for_prompts(compiled: CompiledTools, prompts: Sequence[str]) -> CompiledTools:
    """The set the outputs of ``prompts`` (each rendered prompt, or its
    tail) need (:meth:`CompiledTools.after_prompt`): one for all, so
    prompts that disagree on reasoning are an error."""
    variants = {id(v): v for v in (compiled.after_prompt(prompt) for prompt in prompts)}
    if len(variants) > 1:
        raise GenerationError(
            "the prompts of one batch disagree on reasoning (some end inside a reasoning block, some do not); "
            "generate them in separate batches"
        )
    return next(iter(variants.values()), compiled)


_ACTIVE, _RELEASED = RowState.ACTIVE, RowState.RELEASED
_NO_WORDS = token_words([])


class ToolCallConstraint:
    """The compiled tool grammar applied to a batch of ``batch_size``
    sequences, token by token.

    One decoding step is :meth:`mask_logits` (or :meth:`fill_masks` then
    :meth:`apply`) on the next-token logits, sampling, then :meth:`consume`
    with the chosen token of every row. :meth:`forced_tokens` gives the
    tokens the grammar forces next (fast-forward), :meth:`consume_row` feeds
    several tokens to one row, :meth:`rollback` takes tokens back
    (speculative decoding).

    The rows llguidance computes are filled one after another in the
    calling thread; ``num_threads`` fills them on llguidance's thread pool
    of that size instead. The pool measured 2.4x slower than one thread on
    two cores (16 rows of one short call): where the grammar forces bytes,
    its workers call back into the Python tokenizer (and it was still
    slower with llguidance's native tokenizer; ``bench/batch_fill.py``).

    Masks llguidance computed are kept with ``compiled`` and reused when a
    sequence of the same tool set reaches the same state
    (:mod:`.mask_cache`); ``cache_masks=False`` asks llguidance every time.
    The first constraint of a tool set warms its cache (:func:`warm_mask_cache`,
    medians 3.5-27 ms in ``bench/mask_time.py``) unless an engine's compile
    already did.

    A token the step's own mask allowed is taken without asking llguidance
    (masks equal llguidance's, so it would accept it); the row's matcher is
    fed the tokens it missed, in one call, when llguidance is next asked
    for the row: a mask the cache does not hold, forced tokens, a token
    without this step's mask, a rollback. A call the cache knows end to end
    never feeds llguidance at all.

    ``budget`` (one for every row, or one per row) is the most tokens a row
    may take: a call then always closes within it. As the budget runs out,
    only what completes the output validly in the tokens left is allowed
    (:mod:`.budget`): the open value closed, the required keys filled with
    short valid values, the call closed; :meth:`closed_by_budget` says
    where that cut a row short. A budget no complete output fits raises
    :class:`~constrained.errors.BudgetError` here.
    """

    def __init__(
        self,
        compiled: CompiledTools,
        batch_size: int = 1,
        *,
        on_violation: OnViolation = "unconstrained",
        num_threads: int | None = None,
        cache_masks: bool = True,
        budget: int | Sequence[int] | None = None,
    ) -> None:
        if batch_size < 1:
            raise ArgumentError(f"batch_size must be at least 1, got {batch_size}", argument="batch_size")
        if on_violation not in ON_VIOLATION:
            raise ArgumentError(
                f"on_violation must be one of {', '.join(ON_VIOLATION)}, got {on_violation!r}", argument="on_violation"
            )
        self.compiled = compiled
        self.batch_size = batch_size
        self.on_violation: OnViolation = on_violation
        self.vocab_size = compiled.tokenizer.vocab_size
        self.events: list[ConstraintEvent] = []
        self._matchers = [compiled.matcher() for _ in range(batch_size)]
        self._states = [RowState.ACTIVE] * batch_size
        self._consumed = [0] * batch_size  # tokens the row holds under the grammar
        # Per row, how many of its last tokens held (in _history) its matcher
        # was not fed yet: a token its step's mask allowed is held without
        # llguidance, which is fed only when it is asked (_catch_up).
        self._unfed = [0] * batch_size
        self._unmatched = [0] * batch_size  # tokens fed after a violation, incl. the forbidden one
        self._ended = [False] * batch_size  # the last token held is an end token (not in the matcher)
        self._masked = [False] * batch_size  # the host bitmask holds the row's mask for its next token
        # Per row, the tokens its filled mask forbids when they are few and known
        # (CPU apply sets just those), else None.
        self._forbidden: list[Any] = [None] * batch_size
        # Per row, the one token its filled mask allows, when known (CPU
        # apply keeps just that logit), else None.
        self._single: list[int | None] = [None] * batch_size
        # Per row, what its host bitmask row holds when known, so the next
        # fill need not write it again: a kept mask (its token or its row)
        # or a precomputed raw-text row, by identity; else None.
        self._holding: list[object] = [None] * batch_size
        self._end_ids = frozenset(compiled.tokenizer.eos_token_ids)
        self._cache: MaskCache | None = mask_cache(compiled) if cache_masks else None
        self._trackers = frame_trackers(compiled, batch_size, self._cache.walks, self._cache.trackers) \
            if self._cache is not None else frame_trackers(compiled, batch_size)
        self._arguments = arguments_trackers(compiled, batch_size, self._cache.walks) \
            if self._trackers is None and self._cache is not None else None
        self._call_marks = _call_marks(compiled) if self._cache is not None else {}
        # Per row: where its history stands in the mask cache (None: not
        # looked up), and the node where its open raw value began (for a
        # value of any text whose member alone decides what follows it, the
        # member's node, which keeps its crossing tokens).
        self._nodes: list[MaskNode | None] = [self._cache.root if self._cache else None] * batch_size
        self._value_starts: list[MaskNode | None] = [None] * batch_size
        self._call_nodes: list[MaskNode | None] = [None] * batch_size  # where the row's open call began
        self._skeletons: list[MaskNode | None] = [None] * batch_size  # where the row's JSON skeleton stands
        # Per row, the places its JSON skeleton keeps to come back to (JsonWalk.skeleton).
        self._kept: list[tuple[MaskNode | None, ...]] = [()] * batch_size
        self._misses = [0] * batch_size  # cache misses since the last hit
        # Per row and token held (end tokens aside): the token, the tracker's
        # snapshot and the row's places in the cache before it, for rollback.
        self._history: list[list[tuple[int, Any, tuple[Any, ...]]]] = [[] for _ in range(batch_size)]
        # Per row, how many tokens it held when llguidance last computed its
        # mask (-1: never, with this matcher); see _roll_back_matcher.
        self._mask_at = [-1] * batch_size
        # Per row, the tokens llguidance said the grammar forces from here
        # (``compute_ff_tokens``), dropped from the front as they are fed.
        self._forced: list[list[int]] = [[] for _ in range(batch_size)]
        self._executor = _executor(num_threads) if batch_size > 1 and num_threads is not None else None
        self.precomputed_rows = 0
        """Masks filled from precomputed raw-text rows."""
        self.cached_rows = 0
        """Masks filled from the mask cache."""
        self.forced_rows = 0
        """Masks filled from the tokens the grammar forces (the rest by llguidance)."""
        self._words = (self.vocab_size + 31) // 32
        self._buffers: MaskBuffers | None = None
        if self._cache is not None and self._cache.claim_warm_up():
            _warm(compiled)
        self._budget = _call_budget(compiled, batch_size, budget)

    # -- state -------------------------------------------------------------

    def state(self, row: int) -> RowState:
        return self._states[row]

    def is_finished(self, row: int) -> bool:
        """Whether ``row`` should end: its grammar is complete, or a
        violation stopped it."""
        state = self._states[row]
        return state is not _ACTIVE and state is not _RELEASED  # identity: an Enum's hash runs Python code

    def closed_by_budget(self, row: int) -> bool:
        """Whether ``row``'s budget ran short and the constraint allowed only
        the tokens that close its output (a value may be cut short)."""
        return self._budget is not None and self._budget.closed[row]

    @property
    def finished(self) -> list[bool]:
        return [self.is_finished(row) for row in range(self.batch_size)]

    @property
    def all_finished(self) -> bool:
        return all(self.finished)

    def forced_tokens(self, row: int) -> list[int]:
        """The tokens the grammar forces next in ``row`` (empty when there is
        a choice, or when the row is not governed by the grammar)."""
        if self._states[row] is not RowState.ACTIVE:
            return []
        if self._trackers is not None and self._trackers[row].in_text_frame:
            return []  # raw text of any content: never a single choice
        return list(self._forced_from(row))

    def _forced_from(self, row: int) -> list[int]:
        """The tokens forced from ``row``'s state: those left from the last
        time llguidance was asked, else llguidance's (about 1 us when none
        are forced; once it names a run of forced tokens, each step of the
        run is known without it)."""
        forced = self._forced[row]
        if not forced:
            self._catch_up(row)
            if self._states[row] is not _ACTIVE:
                return []
            forced = self._forced[row] = self._matchers[row].compute_ff_tokens()
        return forced

    def _catch_up(self, row: int) -> None:
        """Feed the row's matcher the tokens it holds unfed (in one call).
        llguidance refusing one means a mask let it through that was not
        llguidance's (a mask cache error): the row takes that token and
        those after it back and meets a violation there, as at a forbidden
        token (:meth:`_violate`)."""
        unfed = self._unfed[row]
        if unfed:
            self._unfed[row] = 0
            fed = self._matchers[row].try_consume_tokens([entry[0] for entry in self._history[row][-unfed:]])
            if fed < unfed:
                refused = unfed - fed
                token = self._history[row][-refused][0]
                self._take_back(row, refused)
                self._consumed[row] -= refused
                self._violate(row, token, refused)

    def _crossing(self, row: int, state: int, candidates: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """Those of ``candidates`` the grammar allows, as mask words and
        their bits: tokens that end the row's open value of any text from
        the closing's KMP state ``state`` and go on past the closing. What
        follows such a value does not depend on its text (:mod:`.mask_cache`),
        so they are kept per state with the node where the value opened,
        and one lookup serves a step (GLM's closing has hundreds of
        candidates); else the matcher, once caught up, is asked of each."""
        start = self._value_starts[row]
        crossings = start.crossings if start is not None else None
        allowed = crossings.get(state) if crossings is not None else None
        if allowed is None:
            self._catch_up(row)
            if self._states[row] is not _ACTIVE:  # catching up met a violation: nothing to learn
                return _NO_WORDS
            allowed = self._allowed_after(row, [], candidates)
            if start is not None:
                if start.crossings is None:
                    start.crossings = {}
                start.crossings[state] = allowed
        return allowed

    def _learn_crossings(self, row: int, start: MaskNode) -> None:
        """At the first step of a value of any text that opened at ``start``,
        where nothing was learned yet: the crossing tokens (:meth:`_crossing`)
        of every state of the closing that has some, asked of llguidance
        from here with the closing's first bytes written as the value's
        text (for each state they lead to from here; the others are asked
        when met). Asked when the text first reaches such a state, the
        matcher would first be fed the whole value (about 1 us a token: a
        millisecond at the closing of a long file's content); here it is
        fed the markup before it. The warm-up's calls learn them for the
        values they open."""
        assert self._trackers is not None
        tracker = self._trackers[row]
        masks = tracker.masks
        start.crossings = {}
        if not any(masks.crossing):
            return
        self._catch_up(row)
        if self._states[row] is not _ACTIVE:
            return
        for state, candidates in enumerate(masks.crossing):
            if not candidates or tracker.closing_state_after(masks.close[:state]) != state:
                continue
            text = self.compiled.tokenizer.encode(masks.close[:state].decode("utf-8"))
            if self._matchers[row].validate_tokens(text) == len(text):
                start.crossings[state] = self._allowed_after(row, text, candidates)

    def _allowed_after(self, row: int, text: list[int], candidates: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """Those of ``candidates`` the row's matcher accepts after the
        tokens ``text`` (not fed), as mask words and their bits."""
        validate = self._matchers[row].validate_tokens
        return token_words([token for token in candidates if validate([*text, token]) == len(text) + 1])

    def _stopped(self, row: int) -> bool:
        """Whether the row's grammar is complete (llguidance's ``is_stopped``:
        only an end token may follow). Without feeding the matcher when the
        row's next mask is known and allows more than the end tokens, or the
        row stands inside a value of any text, which its closing must end."""
        if self._unfed[row]:
            node = self._nodes[row]
            if node is not None and (node.goes_on or self._goes_on(node)):
                return False
            if self._trackers is not None and self._trackers[row].in_any_text_value:
                return False
            self._catch_up(row)
            if self._states[row] is not _ACTIVE:
                return False
        return bool(self._matchers[row].is_stopped())

    def _goes_on(self, node: MaskNode) -> bool:
        """Whether ``node`` keeps a mask that allows a token other than the
        end tokens (learned once per node)."""
        goes_on = node.goes_on
        if goes_on is None:
            if node.mask is None:
                return False
            goes_on = node.goes_on = allows_other_than(node.mask, self._end_ids)
        return goes_on

    # -- feeding tokens ----------------------------------------------------

    def consume(self, token_ids: Sequence[int] | torch.Tensor) -> None:
        """Feed one sampled token per row (a sequence or a 1-D tensor of
        ``batch_size`` ids). Rows already finished ignore theirs (a generate
        loop pads them)."""
        ids = token_ids.tolist() if hasattr(token_ids, "tolist") else list(token_ids)
        if len(ids) != self.batch_size:
            raise ArgumentError(
                f"consume() needs one token per row ({self.batch_size}), got {len(ids)}; "
                "feed a single row with consume_row()",
                argument="token_ids",
            )
        for row, token in enumerate(ids):
            if not self.is_finished(row):
                self._feed(row, int(token))

    def consume_row(self, row: int, token_ids: Sequence[int]) -> None:
        """Feed several tokens to one row, e.g. the forced tokens appended
        without sampling."""
        for token in token_ids:
            if self.is_finished(row):
                raise ConstraintError(
                    f"sequence {row} is {self._states[row].value}; it takes no more tokens "
                    f"(got {int(token)} after its end)"
                )
            self._feed(row, int(token))

    def _feed(self, row: int, token: int) -> None:
        state = self._states[row]
        if state is _RELEASED:
            self._unmatched[row] += 1
            return
        forced = self._forced[row]
        if forced:
            if forced[0] == token:
                del forced[0]
            else:
                forced.clear()
        if self._accepts(row, token):
            self._consumed[row] += 1
            if self._budget is not None:
                self._budget.fed(row, token)
            if not self._ended[row]:
                self._advance(row, token)
            if self._ended[row] or self._stopped(row):
                self._states[row] = RowState.FINISHED
        elif self._states[row] is _ACTIVE:
            self._violate(row, token, 1)
        else:  # catching up met a violation before this token
            self._unmatched[row] += 1

    def _violate(self, row: int, token: int, unmatched: int) -> None:
        """``token``, after the tokens the row holds, is not the grammar's:
        release or stop the row (``on_violation``) and record the event;
        ``unmatched``: the tokens it holds from there on."""
        new_state = RowState.RELEASED if self.on_violation == "unconstrained" else RowState.STOPPED
        self._states[row] = new_state
        self._unmatched[row] = unmatched
        event = ConstraintEvent(row, self._consumed[row], token, self._describe(token), new_state)
        self.events.append(event)
        logger.warning("%s", event)

    def _advance(self, row: int, token: int) -> None:
        """Move the row's tracker and its place in the mask cache past an
        accepted ``token``. A value that leaves no trace once closed is
        skipped: the node after it hangs off the node where it opened, by
        its closing token. Inside it, a value of any text has no node (its
        masks are precomputed rows); a typed value's nodes are keyed by its
        tokens, from the node where it opened, and a number's text by its
        state (after ``12`` and ``345`` alike, llguidance's lexer and parser
        stand in the same place); so is a free leaf inside JSON
        (:meth:`_in_json`). A call's opening and closing tokens lead to one
        node each, whichever call it is (:func:`_call_marks`)."""
        tracker = self._trackers[row] if self._trackers is not None else None
        arguments = self._arguments[row] if self._arguments is not None else None
        follower = tracker if tracker is not None else arguments  # _follower(row), without the call
        node, start, call = self._nodes[row], self._value_starts[row], self._call_nodes[row]
        self._history[row].append((token, follower.snapshot() if follower is not None else None,
                                   (node, start, call, self._skeletons[row], self._kept[row])))
        mark = self._call_marks.get(token)
        if mark is not None:
            if follower is not None:
                follower.feed(token)
            assert self._cache is not None
            self._nodes[row], self._value_starts[row] = self._cache.root.child(mark), None
            if mark == OPENED_CALL:
                self._call_nodes[row] = self._nodes[row]
            return
        if tracker is None:
            if arguments is None:
                self._nodes[row] = node.child(token) if node is not None else None
                return
            walk = arguments.walk
            arguments.feed(token)
            self._nodes[row] = self._in_json(row, arguments.walk, arguments.walk is walk, node, token)
            return
        if tracker.extend_markup(token):  # most tokens: nothing opens or closes in them
            self._nodes[row] = self._past_markup(tracker, call, node, token)
            return
        inside, text, closed = tracker.in_traceless_value, tracker.in_any_text_value, tracker.values_closed
        walk = tracker.walk
        tracker.feed(token)
        closed = tracker.values_closed - closed
        if inside and closed == 0 and tracker.in_traceless_value:  # still inside the value
            if text:
                return
            number = tracker.number_state
            if number is not None:  # a number's text: one node per state of its automaton
                self._nodes[row] = start.child(LEAF_LABELS + number) if start is not None else None
            else:
                self._nodes[row] = self._in_json(row, tracker.walk, tracker.walk is walk, node, token)
            return
        before = node
        member = tracker.closed_member if closed == 1 else None
        if inside and member is not None and call is not None and self._cache is not None:
            # What follows depends on the key alone: one node per key and
            # closing token from where the call began, whichever keys came before.
            node = call.child(self._cache.label(member)).child(~token)
        elif inside:  # the token closed it (exactly one: else the row stops using the cache)
            node = start.child(~token) if closed == 1 and start is not None else None
        else:
            node = self._past_markup(tracker, call, node, token)
        if inside and call is not None and (tool := tracker.closed_arguments) is not None:
            node = self._arguments_closed(call, tool, token)
        if tracker.in_traceless_value:  # the token opened one
            # Where its member alone decides what follows, a number written in
            # the markup (Gemma) and a JSON value are keyed from one node per
            # member, whether the token also holds the markup before the
            # value (``:[`` against ``:`` then ``[-``) or not.
            opened = tracker.open_member if call is not None and before is not None and not inside else None
            member_node = None
            if opened is not None:
                assert call is not None and self._cache is not None
                member_node = call.child(self._cache.label(("value", *opened)))
            number = tracker.number_state
            if number and not inside and before is not None:
                # It also began a number written in the markup: else keyed
                # from before the token, whatever digit it began with.
                before = member_node or before
                node, start = before.child(LEAF_LABELS + number), before
            else:
                start = node
                if tracker.in_any_text_value:  # its crossing tokens are kept per member where it alone decides them
                    node, start = None, member_node or node
                elif tracker.walk is not None:  # JSON: its skeleton begins in this token
                    node = self._in_json(row, tracker.walk, False, before, token, member_node)
        self._nodes[row], self._value_starts[row] = node, start

    def _past_markup(self, tracker: FrameTracker, call: MaskNode | None, node: MaskNode | None,
                     token: int) -> MaskNode | None:
        """The row's node after ``token`` from ``node``, the token fed
        outside any value that leaves no trace (in the call's markup, mostly)."""
        if call is not None and (after := tracker.markup_after_member) is not None:
            # The markup after a member's value: keyed by the member and its
            # text since, so calls meet again after values that ended alike
            # in text but not in tokens (a string's delimiter, a number's
            # last digit).
            assert self._cache is not None
            node = call.child(self._cache.label(("markup", *after))).child(token)
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
        assert self._cache is not None
        return call.child(self._cache.label(("arguments closed", tool))).child(token)

    def _in_json(self, row: int, walk: JsonWalk | None, walking: bool, before: MaskNode | None,
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
        skeleton = self._skeletons[row]
        if not walking or skeleton is None:
            # The value began in this token: its skeleton from the bytes of the token before it.
            assert self._cache is not None
            if member is not None:
                skeleton = member
            else:
                data = self.compiled.tokenizer.token_bytes(token)
                skeleton = before.child(self._cache.label(("value", data[: len(data) - (walk.first_fed or 0)])))
            self._kept[row] = ()
        for entry in walk.skeleton:
            if entry < MARK:
                skeleton = skeleton.child(BYTE_LABELS + entry)
            elif entry < BACK:  # a place to come back to
                kept = self._kept[row]
                slot = entry - MARK
                self._kept[row] = (*kept[:slot], *(None,) * (slot - len(kept)), skeleton, *kept[slot + 1 :])
            else:
                back = self._kept[row][entry - BACK]
                assert back is not None
                skeleton = back
        self._skeletons[row] = skeleton
        if not walk.in_leaf:
            return skeleton.child(token)
        state = walk.leaf_state
        return skeleton.child(LEAF_LABELS + state) if state is not None else before.child(token)

    def _accepts(self, row: int, token: int) -> bool:
        """Whether the grammar allows ``token``, taking it if so. The mask of
        this very step answers when the row has one: the token is held
        without feeding the matcher (:meth:`_catch_up` feeds it when
        llguidance is next asked; a step the mask cache answers does not
        ask it). Else the matcher is asked, and left usable either way
        (``try_consume_tokens``). An end token is never fed to the matcher:
        llguidance stops at it and cannot roll it back exactly, and the row
        needs no more masks from it; without this step's mask a copy of the
        matcher is asked (about 100 us)."""
        masked, self._masked[row] = self._masked[row], False
        if masked and 0 <= token < self.vocab_size and self._mask_allows(row, token):
            if token in self._end_ids:
                self._ended[row] = True
            else:
                self._unfed[row] += 1  # _advance holds it in the history
            return True
        self._catch_up(row)
        if self._states[row] is not _ACTIVE:
            return False
        if token not in self._end_ids:
            return bool(self._matchers[row].try_consume_tokens([token]) == 1)
        if not self._matchers[row].deep_copy().consume_token(token):
            return False
        self._ended[row] = True
        return True

    def _mask_allows(self, row: int, token: int) -> bool:
        assert self._buffers is not None
        return bool((self._buffers.host_view[row, token >> 5] >> (token & 31)) & 1)

    def _describe(self, token: int) -> str:
        if 0 <= token < self.vocab_size:
            return self.compiled.tokenizer.token_bytes(token).decode("utf-8", "replace")
        return "<outside the vocabulary>"

    def rollback(self, num_tokens: int, row: int | None = None) -> None:
        """Take back the last ``num_tokens`` tokens of ``row`` (every row when
        ``row`` is None). Rolling back over a violation restores the
        constraint; a finished row becomes active again."""
        if num_tokens < 0:
            raise ArgumentError(f"num_tokens must not be negative, got {num_tokens}", argument="num_tokens")
        rows = range(self.batch_size) if row is None else [row]
        for r in rows:
            self._masked[r] = False
            self._forced[r] = []
            if self._budget is not None:
                self._budget.forget(r)
            held = self._consumed[r] + self._unmatched[r]
            if num_tokens > held:
                raise ConstraintError(f"sequence {r} holds {held} tokens; cannot roll back {num_tokens}")
            unmatched = min(num_tokens, self._unmatched[r])
            self._unmatched[r] -= unmatched
            matched = num_tokens - unmatched
            if matched and self._ended[r]:
                self._ended[r] = False
                self._consumed[r] -= 1
                matched -= 1
            if matched:
                self._roll_back_matcher(r, matched)
                self._take_back(r, matched)
            self._consumed[r] -= matched
            if self._unmatched[r] == 0:
                self._states[r] = RowState.ACTIVE
                if self._ended[r] or self._stopped(r):
                    self._states[r] = RowState.FINISHED

    def _take_back(self, row: int, count: int) -> None:
        """Restore the row's follower and places in the cache to where they
        stood before its last ``count`` tokens held, and forget those."""
        history = self._history[row]
        _, snapshot, (self._nodes[row], self._value_starts[row], self._call_nodes[row], self._skeletons[row],
                      self._kept[row]) = history[-count]
        follower = self._follower(row)
        if follower is not None:
            follower.restore(snapshot)
        del history[-count:]

    def _roll_back_matcher(self, row: int, count: int) -> None:
        """Take ``count`` tokens back from the row's matcher.

        llguidance keeps the last mask it computed, keyed by its lexer state
        and parser row index, and its rollback keeps it: tokens fed after a
        rollback can meet that key again in a different parser row and get
        that mask (after a string value that ends one tool's arguments, where
        ``"}`` may follow, the first string value of another tool, which
        still needs a key, allowed ``"}`` too). So when llguidance computed a
        mask past the point rolled back to, the row gets a new matcher, fed
        the tokens it keeps (under 1 us a token) when llguidance is next
        asked; otherwise its own rollback is exact. Tokens the matcher was
        not fed are only forgotten."""
        kept = self._consumed[row] - count
        unfed = min(count, self._unfed[row])
        self._unfed[row] -= unfed
        count -= unfed
        if not count:
            return
        if self._mask_at[row] <= kept:
            if not self._matchers[row].rollback(count):
                raise ConstraintError(f"sequence {row}: llguidance could not roll back {count} tokens")
            return
        # A new matcher, fed the tokens kept when it is next asked.
        self._matchers[row], self._mask_at[row], self._unfed[row] = self.compiled.matcher(), -1, kept

    # -- the mask ----------------------------------------------------------

    def mask_logits(self, logits: torch.Tensor) -> torch.Tensor:
        """Mask ``logits`` (``batch_size`` x vocabulary, any float dtype, CPU
        or CUDA) in place so that only allowed tokens stay finite; returns
        ``logits``. Columns past the tokenizer's vocabulary (padded embedding
        rows) are masked too."""
        self.prepare(logits)
        self.fill_masks()
        return self.apply(logits)

    def fill_masks(self) -> None:
        """Compute every row's allowed tokens into the host bitmask. The
        buffers must exist: call :meth:`prepare` first or use
        :meth:`mask_logits`. :func:`fill_masks_together` fills several
        constraints in one step."""
        pending = self._fill_known()
        if self._executor is None or len(pending) < 2:
            for matcher, row, _ in pending:
                self._compute(matcher, row)
        else:
            work = [(matcher, row) for matcher, row, _ in pending]
            for _, row in work:
                self._mask_at[row] = self._consumed[row]
            self._executor.unsafe_compute_mask_ptr(work, self._require_buffers().host_address, self._words * 4,
                                                   self.batch_size)
        self._settle(pending)

    def _steer(self) -> None:
        """Rows near the end of their budget: only what closes within it
        (:mod:`.budget`)."""
        assert self._budget is not None
        words = self._require_buffers().host_words
        for row, state in enumerate(self._states):
            if state is _ACTIVE and self._budget.narrow(row, self._consumed[row], words[row],
                                                        partial(self._caught_up, row)):
                self._forbidden[row] = self._holding[row] = None
                self._single[row] = single_token(words[row])
                if self._states[row] is _RELEASED:  # catching up met a violation
                    words[row].fill(ALL_ALLOWED)
                    self._single[row] = None
                elif self._states[row] is not _ACTIVE:
                    np.copyto(words[row], self._require_buffers().end_words)
                    self._single[row] = None

    def _caught_up(self, row: int) -> Any:
        """The row's matcher, fed every token the row holds."""
        self._catch_up(row)
        return self._matchers[row]

    def _compute(self, matcher: Any, row: int) -> None:
        """llguidance's mask for ``row`` into the host bitmask (the address
        from torch: numpy's ``ctypes`` costs about 3 us a call)."""
        row_bytes = self._words * 4
        self._mask_at[row] = self._consumed[row]
        matcher.unsafe_compute_mask_ptr(self._require_buffers().host_address + row * row_bytes, row_bytes)

    def _fill_known(self) -> list[tuple[Any, int, MaskNode | None]]:
        """Fill the rows whose mask is known without llguidance (raw-text
        rows, the mask cache, finished and released rows); return the
        others: (matcher, row, the row's cache node). The hot path of every
        step: locals over attribute lookups."""
        buffers = self._require_buffers()
        words = buffers.host_words
        pending: list[tuple[Any, int, MaskNode | None]] = []
        forbidden, single, holding = self._forbidden, self._single, self._holding
        nodes, trackers, cache = self._nodes, self._trackers, self._cache
        for row, state in enumerate(self._states):
            held = holding[row]
            forbidden[row] = single[row] = holding[row] = None
            if state is _ACTIVE:
                self._masked[row] = True
                node = nodes[row]
                if trackers is not None and trackers[row].in_text_frame:
                    start = self._value_starts[row]
                    if start is not None and start.crossings is None:
                        self._learn_crossings(row, start)  # a violation there is met below
                    # partial, made per step: kept on self it would be a cycle that outlives the request
                    forbidden[row], holding[row] = trackers[row].fill(words[row], partial(self._crossing, row), held)
                    self.precomputed_rows += 1
                elif node is not None and (mask := node.mask) is not None:
                    assert cache is not None
                    forbidden[row] = cache.write(node, words[row], held)
                    holding[row] = mask
                    single[row] = mask if isinstance(mask, int) else None
                    self.cached_rows += 1
                    self._misses[row] = 0
                elif forced := self._forced_from(row):
                    # llguidance's mask where bytes are forced allows just the
                    # first token of their tokenization (the fuzzer's crosscheck
                    # compares the two).
                    single[row] = holding[row] = token = forced[0]
                    write_token(words[row], token, held)
                    if node is not None:
                        assert cache is not None
                        cache.keep_token(node, token)
                    self.forced_rows += 1
                elif self._states[row] is _ACTIVE:
                    pending.append((self._matchers[row], row, node))
                if self._states[row] is not _ACTIVE:  # catching up met a violation
                    state, self._masked[row] = self._states[row], False
                    forbidden[row] = single[row] = holding[row] = None
            if state is _RELEASED:
                words[row].fill(ALL_ALLOWED)
                forbidden[row] = buffers.nothing
            elif state is not _ACTIVE:
                np.copyto(words[row], buffers.end_words)
        return pending

    def _settle(self, pending: list[tuple[Any, int, MaskNode | None]]) -> None:
        """After llguidance filled the ``pending`` rows: keep their masks,
        then narrow the rows near the end of their budget."""
        if pending:
            self._keep_computed(pending)
        if self._budget is not None:
            self._steer()

    def _keep_computed(self, pending: list[tuple[Any, int, MaskNode | None]]) -> None:
        """Keep the masks llguidance filled in the cache, and note the rows
        that allow one token (CPU apply)."""
        buffers = self._require_buffers()
        cpu = buffers.cpu
        for _, row, node in pending:
            if node is None:
                self._single[row] = self._holding[row] = single_token(buffers.host_words[row]) if cpu else None
                continue
            assert self._cache is not None
            self._single[row] = self._cache.store(node, buffers.host_words[row])
            self._holding[row] = node.mask  # the row the cache kept is a copy of the host's
            if self._single[row] is None and self._keyed_on_text(row):  # a forced token costs nothing to keep
                self._misses[row] += 1
                if self._misses[row] >= MISSES_IN_A_ROW:
                    self._nodes[row] = self._value_starts[row] = None

    def _keyed_on_text(self, row: int) -> bool:
        """Whether the row's place in the cache is keyed by text written, so
        a run of misses may be text no other request writes: outside JSON
        the walk follows, or inside JSON where its skeleton keeps the text
        (:attr:`JsonWalk.keeps_text`). Misses in a JSON value's structure are
        its new places, which other requests meet."""
        follower = self._follower(row)
        walk = follower.walk if follower is not None else None
        return walk is None or walk.keeps_text

    def _follower(self, row: int) -> FrameTracker | ArgumentsTracker | None:
        """What follows the row's markup: its frame tracker (raw-value
        dialects) or its arguments tracker (JSON arguments), if any."""
        if self._trackers is not None:
            return self._trackers[row]
        return self._arguments[row] if self._arguments is not None else None

    def allowed_words(self, row: int) -> np.ndarray:
        """Row ``row`` of the host bitmask as the last :meth:`fill_masks` left
        it (``uint32`` words; token ``t`` is bit ``t % 32`` of word ``t // 32``):
        for a sampler that reads the mask without logits (``constrained.qa.fuzz``).
        A read-only view, refilled by the next :meth:`fill_masks` (which
        writes only what changed: the constraint knows what each row holds)."""
        words: np.ndarray = self._require_buffers().host_words[row]
        words.flags.writeable = False  # this view only; the buffer stays the constraint's
        return words

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        """Apply the filled bitmask to ``logits`` in place: upload (a
        non-blocking copy from pinned memory on CUDA), expand each mask byte
        through a 256-entry table into ``+inf``/``-inf`` per token, and take
        the elementwise minimum with the logits, so allowed logits keep their
        exact value and forbidden ones become ``-inf``. Fixed shapes, no
        allocation, capturable in a CUDA graph. On CPU, rows whose mask is
        known in short take a shorter path (:func:`.logits_mask.apply_mask`)."""
        buffers = self._require_buffers()
        buffers.check(logits)
        return apply_mask(buffers, logits, self._forbidden, self._single, self.vocab_size)

    def prepare(self, logits: torch.Tensor) -> None:
        """Allocate the buffers for logits shaped like ``logits`` (done by the
        first :meth:`mask_logits` call; call it yourself before capturing
        :meth:`apply` in a CUDA graph)."""
        if self._buffers is None:
            self._buffers = MaskBuffers.allocate(self.compiled.tokenizer, self.batch_size, self._words, logits)
            self._holding = [NOTHING] * self.batch_size  # a new bitmask is zeros
        else:
            self._buffers.check(logits)

    def prepare_host(self) -> None:
        """Allocate the host bitmask alone, without torch, for a caller that
        reads each row's mask (:meth:`allowed_words`) and applies it itself
        (``constrained.llama_cpp``'s numpy scores, SGLang's bitmask)."""
        if self._buffers is None:
            self._buffers = MaskBuffers.host_only(self.compiled.tokenizer, self.batch_size, self._words)
            self._holding = [NOTHING] * self.batch_size  # a new bitmask is zeros

    def _require_buffers(self) -> MaskBuffers:
        if self._buffers is None:
            raise ConstraintError("no buffers yet: call prepare(logits) or mask_logits(logits) first")
        return self._buffers

    def __repr__(self) -> str:
        states = ", ".join(state.value for state in self._states)
        return f"ToolCallConstraint({self.compiled.dialect!r}, batch_size={self.batch_size}, rows=[{states}])"


_TRUNK_STEPS = 64
"""The most steps :func:`warm_mask_cache` walks from the start (a forced run is shorter)."""
_HEAD_TOOLS = 16
"""Tool sets of at most this many tools also have a call of each tool warmed."""
_CALL_TOKENS = 256
"""The most tokens of each tool's example call :func:`warm_mask_cache` walks."""


def _call_budget(compiled: CompiledTools, batch_size: int, budget: int | Sequence[int] | None) -> CallBudget | None:
    """The rows' budgets (one for all, or one per row), checked against the
    shortest complete output before anything is generated."""
    if budget is None:
        return None
    budgets = [budget] * batch_size if isinstance(budget, int) else [int(b) for b in budget]
    if len(budgets) != batch_size:
        raise ArgumentError(f"budget needs one value per row ({batch_size}), got {len(budgets)}", argument="budget")
    return CallBudget(compiled, budgets)


def warm_mask_cache(compiled: CompiledTools) -> None:
    """Fill ``compiled``'s mask cache along the paths requests of the tool
    set walk: the tokens the grammar forces from the start and the mask of
    the first choice, then (up to 16 tools) one call of each tool with
    example arguments (:func:`~constrained.frames.examples.example_arguments`;
    without any, a call with none), and the other calls of
    :func:`~constrained.frames.examples.warm_up_arguments`: with fractions
    and negative numbers where the tool takes any number or integer (masks
    there are one per state of the number's text: ``0.5`` and ``0`` reach
    the states after a leading zero, a point and a decimal, ``-0.5`` and
    ``-1`` the state after a minus, and the tokens a value begins with may
    hold the bytes before it, ``[0`` or ``[-``), without each optional key
    and with each alone, with every enum at each of its values (nested ones
    too), booleans false, arrays empty, unions' other options and values of
    any type of other types, for as long as the grammar allows their
    tokens; then the first call twice, where the grammar allows a second
    call. Once a value that leaves no trace is closed, the masks after it
    serve every call that writes the same keys (:meth:`ToolCallConstraint._advance`),
    so the walk computes the markup of the tool's keys, the closings of its
    values and the end of the call. These are llguidance's costliest masks
    (100-200 us on a grammar it has not used: its lexer states are built on
    first use), so an engine computes them where it compiles, on its compile
    thread, and the decoding step finds them cached; in a loop of one's own
    the first constraint computes them before its first mask. The walks stop once
    the rows held take half the cache's room, the rest being left to requests, and
    the rows kept are indexed by the tokens they forbid (as their first
    reuse would). The cache then holds what those calls, made as requests,
    would have left there.

    Done once per tool set, by whichever comes first: this call, or the
    first :class:`ToolCallConstraint` made from ``compiled`` (so a loop of
    one's own finds the cache warmed without asking)."""
    if mask_cache(compiled).claim_warm_up():
        _warm(compiled)


def _warm(compiled: CompiledTools) -> None:
    """:func:`warm_mask_cache`'s walks, by the caller that claimed them."""
    from ..frames.examples import warm_up_arguments
    from ..output.render import render_tool_calls

    cache = mask_cache(compiled)
    constraint = ToolCallConstraint(compiled)
    constraint.prepare_host()
    for _ in range(_TRUNK_STEPS):
        constraint.fill_masks()
        forced = constraint.forced_tokens(0)
        if not forced:
            break
        constraint.consume_row(0, forced[:1])
    tools = compiled.tools if len(compiled.tools) <= _HEAD_TOOLS else ()
    variants = [warm_up_arguments(tool) for tool in tools]
    # Every tool's first call, then every tool's second, and so on: the
    # walks may stop at half the cache's rows.
    calls = [(tool, arguments[turn]) for turn in range(max(map(len, variants), default=0))
             for tool, arguments in zip(tools, variants) if turn < len(arguments)]
    for tool, arguments in calls:
        if _half_full(cache):
            break  # the rest of the cache's room is left to requests
        constraint.rollback(constraint._consumed[0])
        text = render_tool_calls([{"name": tool.name, "arguments": arguments}], compiled.tools, compiled.dialect,
                                 key_order=compiled.key_order)
        _walk_call(constraint, cache, text)
    if calls and not _half_full(cache):  # a second call after the first, where the grammar allows one
        constraint.rollback(constraint._consumed[0])
        twice = [{"name": calls[0][0].name, "arguments": calls[0][1]}] * 2
        _walk_call(constraint, cache, render_tool_calls(twice, compiled.tools, compiled.dialect,
                                                        key_order=compiled.key_order))
    cache.index_rows()


def _walk_call(constraint: ToolCallConstraint, cache: MaskCache, text: str) -> None:
    """Feed row 0 the rendered call ``text`` as a model writes it under the
    mask, filling the mask before each token and after the call, for at
    most :data:`_CALL_TOKENS` tokens. Where the tokenizer merged bytes the
    grammar forces with the text after them (Gemma's ``:-`` before a
    negative number), the forced token is fed and the rest tokenized anew;
    the walk stops at any other token the grammar does not allow, and once
    the rows held take half ``cache``'s room (the constraint's)."""
    tok = constraint.compiled.tokenizer
    ids = tok.encode(text)
    at = 0
    for _ in range(_CALL_TOKENS):
        if _half_full(cache):
            return
        constraint.fill_masks()
        if at == len(ids):
            return  # the mask after the call is filled: another call or the end
        token = ids[at]
        if not constraint._mask_allows(0, token):
            forced = constraint.forced_tokens(0)
            rest = tok.decode(ids[at:])
            piece = tok.decode(forced[:1])
            if not forced or not rest.startswith(piece):
                return
            token, ids, at = forced[0], [forced[0], *tok.encode(rest[len(piece):])], 0
        constraint.consume_row(0, [token])
        at += 1
        if constraint.is_finished(0):
            return


def _half_full(cache: MaskCache) -> bool:
    """Whether the warm-up has used its share of ``cache``'s room for rows: a
    request that goes past the cache's size starts it over, warm-up included."""
    return cache.bytes >= cache.max_bytes // 2


def _call_marks(compiled: CompiledTools) -> dict[int, int]:
    """The mask cache's labels for the tokens that open and close a call,
    when the dialect's markers are single tokens (else none). Every call of
    a dialect's grammar is one rule between those two tokens, the same for
    a first call and a later one, and the special tokens appear nowhere
    else; so after a call's opening the grammar stands where it stands in
    every call, and after its closing where it stands after every call. One
    node each then serves every call of every tool: the masks that choose
    the tool, and those after a call (another call or the end)."""
    dialect = get_dialect(compiled.dialect)
    markers, tok = Markers(compiled.tokenizer), compiled.tokenizer
    opening, closing = tok.token_id(dialect.markup.open), tok.token_id(dialect.markup.close)
    if opening is None or closing is None or not (markers.is_token(dialect.markup.open) and markers.is_token(dialect.markup.close)):
        return {}
    return {opening: OPENED_CALL, closing: CLOSED_CALL}


def fill_masks_together(constraints: Sequence[ToolCallConstraint], num_threads: int | None = None) -> None:
    """:meth:`~ToolCallConstraint.fill_masks` of several constraints (of one
    vocabulary; an engine's requests, each with its own tools). With
    ``num_threads``, the rows llguidance computes go to its thread pool in
    one call, through a scratch bitmask kept per thread; without, one after
    another (faster on few cores, see :class:`ToolCallConstraint`)."""
    if len({constraint._words for constraint in constraints}) > 1:
        raise ArgumentError("constraints filled together must share one vocabulary", argument="constraints")
    pending = [constraint._fill_known() for constraint in constraints]
    work = [(constraint, item) for constraint, items in zip(constraints, pending) for item in items]
    if len(work) == 1 or num_threads is None:
        for constraint, (matcher, row, _) in work:
            constraint._compute(matcher, row)
    elif work:
        for constraint, (_, row, _) in work:
            constraint._mask_at[row] = constraint._consumed[row]
        words = constraints[0]._words
        scratch = _scratch(len(work), words)
        _executor(num_threads).unsafe_compute_mask_ptr(
            [(matcher, index) for index, (_, (matcher, _, _)) in enumerate(work)], scratch.ctypes.data, words * 4, len(work)
        )
        for index, (constraint, (_, row, _)) in enumerate(work):
            np.copyto(constraint._require_buffers().host_words[row], scratch[index])
    for constraint, items in zip(constraints, pending):
        constraint._settle(items)


_scratches = threading.local()


def _scratch(rows: int, words: int) -> np.ndarray:
    """This thread's scratch bitmask of at least ``rows`` x ``words``
    (grown, never shrunk), so a step allocates nothing once it is big enough."""
    scratch = getattr(_scratches, "bits", None)
    if scratch is None or scratch.shape[0] < rows or scratch.shape[1] != words:
        scratch = np.zeros((max(rows, 16), words), dtype=np.uint32)
        _scratches.bits = scratch
    return scratch[:rows]


_executors: dict[int, Any] = {}
_executors_lock = threading.Lock()


def _executor(num_threads: int) -> Any:
    """One ``llguidance.LLExecutor`` (a thread pool) per thread count,
    shared by every constraint of the process."""
    with _executors_lock:
        if num_threads not in _executors:
            import llguidance

            _executors[num_threads] = llguidance.LLExecutor(num_threads)
        return _executors[num_threads]
