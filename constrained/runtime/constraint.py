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
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, NamedTuple
from collections.abc import Sequence

import numpy as np

from ..caches import LruCache
from ..errors import ArgumentError, ConstraintError, GenerationError
from ..grammar.syntax import NotWalkable
from .arguments_tracker import ArgumentsTracker, arguments_trackers
from .budget import CallBudget
from .cache_walk import CacheWalk, Words
from .frame_tracker import FrameTracker, frame_trackers
from .json_walk import walk_shape
from .logits_mask import MaskBuffers, apply_mask
from .mask_cache import NOTHING, MaskCache, MaskNode, mask_cache, single_token, write_token
from .row import HistoryEntry, Row, RowState
from .text_masks import ALL_ALLOWED
from .warm_up import walk_warm_up
from .warm_up import warm_mask_cache as warm_mask_cache

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


class Pending(NamedTuple):
    """A row whose mask llguidance computes this step: its matcher, its
    index and its node in the mask cache (where the mask is kept)."""

    matcher: Any
    row: int
    node: MaskNode | None


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
        cache = mask_cache(compiled) if cache_masks else None
        self.walk = CacheWalk(compiled, cache)
        """How rows move along the tool set's mask cache."""
        self.cache_state = _cache_state(compiled, cache)
        """How the mask cache serves this constraint, in one line: ``on``,
        ``off`` (``cache_masks=False``), or on with values keyed by their
        tokens and why (a value syntax the JSON walk cannot follow)."""
        root = cache.root if cache is not None else None
        self.rows = [Row(compiled.matcher(), follower, follower if isinstance(follower, FrameTracker) else None, root)
                     for follower in _followers(compiled, batch_size, cache)]
        """One :class:`~.row.Row` per sequence: its matcher and where it stands."""
        # Per row, what the host bitmask holds, read by apply as lists: the
        # tokens its filled mask forbids when they are few and known (CPU
        # apply sets just those), the one token it allows when known (CPU
        # apply keeps just that logit), and what its row holds when known, so
        # the next fill need not write it again (a kept mask, its token or
        # its row, or a precomputed raw-text row, by identity).
        self._forbidden: list[Any] = [None] * batch_size
        self._single: list[int | None] = [None] * batch_size
        self._holding: list[object] = [None] * batch_size
        self._end_ids = frozenset(compiled.tokenizer.eos_token_ids)
        self._executor = _executor(num_threads) if batch_size > 1 and num_threads is not None else None
        self.precomputed_rows = 0
        """Masks filled from precomputed raw-text rows."""
        self.cached_rows = 0
        """Masks filled from the mask cache."""
        self.forced_rows = 0
        """Masks filled from the tokens the grammar forces (the rest by llguidance)."""
        self.words = (self.vocab_size + 31) // 32
        """``uint32`` words in a row of the bitmask."""
        self._buffers: MaskBuffers | None = None
        if cache is not None and cache.claim_warm_up():
            walk_warm_up(compiled)
        self._budget = _call_budget(compiled, batch_size, budget)

    # -- state -------------------------------------------------------------

    def state(self, row: int) -> RowState:
        return self.rows[row].state

    def is_finished(self, row: int) -> bool:
        """Whether ``row`` should end: its grammar is complete, or a
        violation stopped it."""
        state = self.rows[row].state
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

    def held(self, row: int) -> int:
        """How many tokens ``row`` holds: what :meth:`rollback` can take back."""
        r = self.rows[row]
        return r.consumed + r.unmatched

    def forced_tokens(self, row: int) -> list[int]:
        """The tokens the grammar forces next in ``row`` (empty when there is
        a choice, or when the row is not governed by the grammar)."""
        r = self.rows[row]
        if r.state is not RowState.ACTIVE:
            return []
        if r.tracker is not None and r.tracker.in_text_frame:
            return []  # raw text of any content: never a single choice
        return list(self._forced_from(row))

    def _forced_from(self, row: int) -> list[int]:
        """The tokens forced from ``row``'s state: those left from the last
        time llguidance was asked, else llguidance's (about 1 us when none
        are forced; once it names a run of forced tokens, each step of the
        run is known without it)."""
        r = self.rows[row]
        forced = r.forced
        if not forced:
            self._catch_up(row)
            if r.state is not _ACTIVE:
                return []
            forced = r.forced = r.matcher.compute_ff_tokens()
        return forced

    def _catch_up(self, row: int) -> None:
        """Feed the row's matcher the tokens it holds unfed (in one call).
        llguidance refusing one means a mask let it through that was not
        llguidance's (a mask cache error): the row takes that token and
        those after it back and meets a violation there, as at a forbidden
        token (:meth:`_violate`)."""
        r = self.rows[row]
        unfed = r.unfed
        if unfed:
            r.unfed = 0
            fed = r.matcher.try_consume_tokens([entry.token for entry in r.history[-unfed:]])
            if fed < unfed:
                refused = unfed - fed
                token = r.history[-refused].token
                _take_back(r, refused)
                r.consumed -= refused
                self._violate(row, token, refused)

    def _caught_up(self, row: int) -> Any:
        """The row's matcher, fed every token the row holds."""
        self._catch_up(row)
        return self.rows[row].matcher

    def _ready_matcher(self, row: int) -> Any:
        """The row's matcher, fed every token the row holds, or None where
        catching up met a violation."""
        self._catch_up(row)
        r = self.rows[row]
        return r.matcher if r.state is _ACTIVE else None

    def _crossing(self, row: int, state: int, candidates: list[int]) -> Words:
        """The crossing tokens of the row's open value of any text from the
        closing's state ``state`` (:meth:`.CacheWalk.crossing`)."""
        return self.walk.crossing(self.rows[row], state, candidates, partial(self._ready_matcher, row))

    def _stopped(self, row: int) -> bool:
        """Whether the row's grammar is complete (llguidance's ``is_stopped``:
        only an end token may follow). Without feeding the matcher when the
        row's next mask is known and allows more than the end tokens, or the
        row stands inside a value of any text, which its closing must end."""
        r = self.rows[row]
        if r.unfed:
            node = r.node
            if node is not None and (node.goes_on or self.walk.goes_on(node)):
                return False
            if r.tracker is not None and r.tracker.in_any_text_value:
                return False
            self._catch_up(row)
            if r.state is not _ACTIVE:
                return False
        return bool(r.matcher.is_stopped())

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
                    f"sequence {row} is {self.rows[row].state.value}; it takes no more tokens "
                    f"(got {int(token)} after its end)"
                )
            self._feed(row, int(token))

    def _feed(self, row: int, token: int) -> None:
        r = self.rows[row]
        if r.state is _RELEASED:
            r.unmatched += 1
            return
        forced = r.forced
        if forced:
            if forced[0] == token:
                del forced[0]
            else:
                forced.clear()
        if self._accepts(row, token):
            r.consumed += 1
            if self._budget is not None:
                self._budget.fed(row, token)
            if not r.ended:
                self.walk.advance(r, token)
            if r.ended or self._stopped(row):
                r.state = RowState.FINISHED
        elif r.state is _ACTIVE:
            self._violate(row, token, 1)
        else:  # catching up met a violation before this token
            r.unmatched += 1

    def _violate(self, row: int, token: int, unmatched: int) -> None:
        """``token``, after the tokens the row holds, is not the grammar's:
        release or stop the row (``on_violation``) and record the event;
        ``unmatched``: the tokens it holds from there on."""
        r = self.rows[row]
        new_state = RowState.RELEASED if self.on_violation == "unconstrained" else RowState.STOPPED
        r.state = new_state
        r.unmatched = unmatched
        event = ConstraintEvent(row, r.consumed, token, self._describe(token), new_state)
        self.events.append(event)
        logger.warning("%s", event)

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
        r = self.rows[row]
        masked, r.masked = r.masked, False
        if masked and 0 <= token < self.vocab_size and self.mask_allows(row, token):
            if token in self._end_ids:
                r.ended = True
            else:
                r.unfed += 1  # the cache walk holds it in the history
            return True
        self._catch_up(row)
        if r.state is not _ACTIVE:
            return False
        if token not in self._end_ids:
            return bool(r.matcher.try_consume_tokens([token]) == 1)
        if not r.matcher.deep_copy().consume_token(token):
            return False
        r.ended = True
        return True

    def mask_allows(self, row: int, token: int) -> bool:
        """Whether the host bitmask, as the last fill left it, allows
        ``token`` in ``row``."""
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
        for r in range(self.batch_size) if row is None else [row]:
            self._roll_back_row(r, num_tokens)

    def _roll_back_row(self, row: int, num_tokens: int) -> None:
        r = self.rows[row]
        r.masked = False
        r.forced = []
        if self._budget is not None:
            self._budget.forget(row)
        held = r.consumed + r.unmatched
        if num_tokens > held:
            raise ConstraintError(f"sequence {row} holds {held} tokens; cannot roll back {num_tokens}")
        unmatched = min(num_tokens, r.unmatched)
        r.unmatched -= unmatched
        matched = num_tokens - unmatched
        if matched and r.ended:
            r.ended = False
            r.consumed -= 1
            matched -= 1
        if matched:
            self._roll_back_matcher(row, matched)
            _take_back(r, matched)
        r.consumed -= matched
        if r.unmatched == 0:
            r.state = RowState.ACTIVE
            if r.ended or self._stopped(row):
                r.state = RowState.FINISHED

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
        r = self.rows[row]
        kept = r.consumed - count
        unfed = min(count, r.unfed)
        r.unfed -= unfed
        count -= unfed
        if not count:
            return
        if r.mask_at <= kept:
            if not r.matcher.rollback(count):
                raise ConstraintError(f"sequence {row}: llguidance could not roll back {count} tokens")
            return
        # A new matcher, fed the tokens kept when it is next asked.
        r.matcher, r.mask_at, r.unfed = self.compiled.matcher(), -1, kept

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
            for item in pending:
                self._computing(item.row)
            self._executor.unsafe_compute_mask_ptr([(item.matcher, item.row) for item in pending],
                                                   self._require_buffers().host_address, self.words * 4, self.batch_size)
        self._settle(pending)

    @staticmethod
    def fill_together(constraints: Sequence[ToolCallConstraint], num_threads: int | None = None) -> None:
        """:func:`fill_masks_together`."""
        if len({constraint.words for constraint in constraints}) > 1:
            raise ArgumentError("constraints filled together must share one vocabulary", argument="constraints")
        pending = [constraint._fill_known() for constraint in constraints]
        work = [(constraint, item) for constraint, items in zip(constraints, pending) for item in items]
        if len(work) == 1 or num_threads is None:
            for constraint, (matcher, row, _) in work:
                constraint._compute(matcher, row)
        elif work:
            for constraint, item in work:
                constraint._computing(item.row)
            words = constraints[0].words
            scratch = _scratch(len(work), words)
            _executor(num_threads).unsafe_compute_mask_ptr(
                [(item.matcher, index) for index, (_, item) in enumerate(work)], scratch.ctypes.data, words * 4, len(work)
            )
            for index, (constraint, item) in enumerate(work):
                np.copyto(constraint._require_buffers().host_words[item.row], scratch[index])
        for constraint, items in zip(constraints, pending):
            constraint._settle(items)

    def _steer(self) -> None:
        """Rows near the end of their budget: only what closes within it
        (:mod:`.budget`)."""
        assert self._budget is not None
        words = self._require_buffers().host_words
        for row, r in enumerate(self.rows):
            if r.state is _ACTIVE and self._budget.narrow(row, r.consumed, words[row], partial(self._caught_up, row)):
                self._forbidden[row] = self._holding[row] = None
                self._single[row] = single_token(words[row])
                if r.state is _RELEASED:  # catching up met a violation
                    words[row].fill(ALL_ALLOWED)
                    self._single[row] = None
                elif r.state is not _ACTIVE:
                    np.copyto(words[row], self._require_buffers().end_words)
                    self._single[row] = None

    def _computing(self, row: int) -> None:
        """Note that llguidance computes the row's mask now (:meth:`_roll_back_matcher`)."""
        r = self.rows[row]
        r.mask_at = r.consumed

    def _compute(self, matcher: Any, row: int) -> None:
        """llguidance's mask for ``row`` into the host bitmask (the address
        from torch: numpy's ``ctypes`` costs about 3 us a call)."""
        row_bytes = self.words * 4
        self._computing(row)
        matcher.unsafe_compute_mask_ptr(self._require_buffers().host_address + row * row_bytes, row_bytes)

    def _fill_known(self) -> list[Pending]:
        """Fill the rows whose mask is known without llguidance (raw-text
        rows, the mask cache, finished and released rows); return the
        others. The hot path of every step: locals over attribute lookups."""
        buffers = self._require_buffers()
        words = buffers.host_words
        pending: list[Pending] = []
        forbidden, single, holding = self._forbidden, self._single, self._holding
        for row, r in enumerate(self.rows):
            held = holding[row]
            forbidden[row] = single[row] = holding[row] = None
            state = r.state
            if state is _ACTIVE:
                state = self._fill_active(row, r, words[row], held, pending)
            if state is _RELEASED:
                words[row].fill(ALL_ALLOWED)
                forbidden[row] = buffers.nothing
            elif state is not _ACTIVE:
                np.copyto(words[row], buffers.end_words)
        return pending

    def _fill_active(self, row: int, r: Row, words: np.ndarray, held: object, pending: list[Pending]) -> RowState:
        """Fill an active row's mask where it is known (``held``: what its
        bitmask row holds), else add it to ``pending``; the row's state after
        (catching up may meet a violation)."""
        r.masked = True
        node = r.node
        tracker = r.tracker
        if tracker is not None and tracker.in_text_frame:
            start = r.value_start
            if start is not None and start.crossings is None:  # a violation there is met below
                self.walk.learn_crossings(r, start, partial(self._ready_matcher, row))
            # partial, made per step: kept on self it would be a cycle that outlives the request
            self._forbidden[row], self._holding[row] = tracker.fill(words, partial(self._crossing, row), held)
            self.precomputed_rows += 1
        elif node is not None and (mask := node.mask) is not None:
            cache = self.walk.cache
            assert cache is not None
            self._forbidden[row] = cache.write(node, words, held)
            self._holding[row] = mask
            self._single[row] = mask if isinstance(mask, int) else None
            self.cached_rows += 1
            r.misses = 0
        elif forced := self._forced_from(row):
            # llguidance's mask where bytes are forced allows just the first
            # token of their tokenization (the fuzzer's crosscheck compares the two).
            self._single[row] = self._holding[row] = token = forced[0]
            write_token(words, token, held)
            if node is not None:
                assert self.walk.cache is not None
                self.walk.cache.keep_token(node, token)
            self.forced_rows += 1
        elif r.state is _ACTIVE:
            pending.append(Pending(r.matcher, row, node))
        if r.state is not _ACTIVE:  # catching up met a violation
            r.masked = False
            self._forbidden[row] = self._single[row] = self._holding[row] = None
        return r.state

    def _settle(self, pending: list[Pending]) -> None:
        """After llguidance filled the ``pending`` rows: keep their masks,
        then narrow the rows near the end of their budget."""
        if pending:
            self._keep_computed(pending)
        if self._budget is not None:
            self._steer()

    def _keep_computed(self, pending: list[Pending]) -> None:
        """Keep the masks llguidance filled in the cache, and note the rows
        that allow one token (CPU apply)."""
        buffers = self._require_buffers()
        cpu, cache = buffers.cpu, self.walk.cache
        for _, row, node in pending:
            if node is None:
                self._single[row] = self._holding[row] = single_token(buffers.host_words[row]) if cpu else None
                continue
            assert cache is not None
            self._single[row] = cache.store(node, buffers.host_words[row])
            self._holding[row] = node.mask  # the row the cache kept is a copy of the host's
            r = self.rows[row]
            if self._single[row] is None and r.keyed_on_text():  # a forced token costs nothing to keep
                r.misses += 1
                if r.misses >= MISSES_IN_A_ROW:
                    r.node = r.value_start = None

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
            self._buffers = MaskBuffers.allocate(self.compiled.tokenizer, self.batch_size, self.words, logits)
            self._holding = [NOTHING] * self.batch_size  # a new bitmask is zeros
        else:
            self._buffers.check(logits)

    def prepare_host(self) -> None:
        """Allocate the host bitmask alone, without torch, for a caller that
        reads each row's mask (:meth:`allowed_words`) and applies it itself
        (``constrained.llama_cpp``'s numpy scores, SGLang's bitmask)."""
        if self._buffers is None:
            self._buffers = MaskBuffers.host_only(self.compiled.tokenizer, self.batch_size, self.words)
            self._holding = [NOTHING] * self.batch_size  # a new bitmask is zeros

    def _require_buffers(self) -> MaskBuffers:
        if self._buffers is None:
            raise ConstraintError("no buffers yet: call prepare(logits) or mask_logits(logits) first")
        return self._buffers

    def __repr__(self) -> str:
        states = ", ".join(r.state.value for r in self.rows)
        return f"ToolCallConstraint({self.compiled.dialect!r}, batch_size={self.batch_size}, rows=[{states}])"


def _followers(compiled: CompiledTools, count: int,
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


def _cache_state(compiled: CompiledTools, cache: MaskCache | None) -> str:
    """:attr:`ToolCallConstraint.cache_state`."""
    if cache is None:
        return "off"
    shape = walk_shape(compiled)
    if isinstance(shape, NotWalkable):
        return f"on, values keyed by their tokens: the JSON walk cannot follow the value syntax ({shape.reason})"
    return "on"


def _take_back(r: Row, count: int) -> None:
    """Restore the row's follower and places in the cache to where they
    stood before its last ``count`` tokens held, and forget those."""
    history: list[HistoryEntry] = r.history
    r.restore(history[-count])
    del history[-count:]


def _call_budget(compiled: CompiledTools, batch_size: int, budget: int | Sequence[int] | None) -> CallBudget | None:
    """The rows' budgets (one for all, or one per row), checked against the
    shortest complete output before anything is generated."""
    if budget is None:
        return None
    budgets = [budget] * batch_size if isinstance(budget, int) else [int(b) for b in budget]
    if len(budgets) != batch_size:
        raise ArgumentError(f"budget needs one value per row ({batch_size}), got {len(budgets)}", argument="budget")
    return CallBudget(compiled, budgets)


def fill_masks_together(constraints: Sequence[ToolCallConstraint], num_threads: int | None = None) -> None:
    """:meth:`~ToolCallConstraint.fill_masks` of several constraints (of one
    vocabulary; an engine's requests, each with its own tools). With
    ``num_threads``, the rows llguidance computes go to its thread pool in
    one call, through a scratch bitmask kept per thread; without, one after
    another (faster on few cores, see :class:`ToolCallConstraint`)."""
    ToolCallConstraint.fill_together(constraints, num_threads)


_scratches = threading.local()


def _scratch(rows: int, words: int) -> np.ndarray:
    """This thread's scratch bitmask of at least ``rows`` x ``words``
    (grown, never shrunk), so a step allocates nothing once it is big enough."""
    scratch = getattr(_scratches, "bits", None)
    if scratch is None or scratch.shape[0] < rows or scratch.shape[1] != words:
        scratch = np.zeros((max(rows, 16), words), dtype=np.uint32)
        _scratches.bits = scratch
    return scratch[:rows]


_executors: LruCache[int, Any] = LruCache("llguidance thread pools", 4)


def _executor(num_threads: int) -> Any:
    """One ``llguidance.LLExecutor`` (a thread pool) per thread count,
    shared by every constraint of the process."""

    def make() -> Any:
        import llguidance

        return llguidance.LLExecutor(num_threads)

    return _executors.get_or_make(num_threads, make)
