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
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ArgumentError, ConstraintError, GenerationError
from .budget import call_budget
from .cache_walk import CacheWalk, cache_state, followers
from .frame_tracker import FrameTracker
from .host_masks import HostMasks, executor
from .mask_cache import mask_cache
from .mask_filling import MISSES_IN_A_ROW, MaskFilling
from .row import ON_VIOLATION, ConstraintEvent, OnViolation, Row, RowState
from .warm_up import walk_warm_up
from .warm_up import warm_mask_cache as warm_mask_cache

if TYPE_CHECKING:
    import torch

    from ..compiler import CompiledTools
    from .logits_mask import MaskBuffers

__all__ = [
    "MISSES_IN_A_ROW", "PROMPT_TAIL", "ConstraintEvent", "OnViolation", "RowState", "ToolCallConstraint",
    "compiled_for_prompts", "fill_masks_together", "warm_mask_cache",
]

logger = logging.getLogger(__name__)

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


class ToolCallConstraint(MaskFilling):
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
        root = cache.root if cache is not None else None
        self.rows = [Row(compiled.matcher(), follower, follower if isinstance(follower, FrameTracker) else None, root)
                     for follower in followers(compiled, batch_size, cache)]
        """One :class:`~.row.Row` per sequence: its matcher and where it stands."""
        self.cache_state = cache_state(compiled, cache, self.rows[0].follower)
        """How the mask cache serves this constraint, in one line: ``on``,
        ``off`` (``cache_masks=False``), or on with values keyed by their
        tokens and why (a value syntax the JSON walk cannot follow, a
        dialect that says neither where raw values nor where JSON arguments
        are)."""
        self.masks = HostMasks(compiled.tokenizer, batch_size)
        """The host bitmask the rows' masks are filled into, and what each row holds."""
        self._end_ids = frozenset(compiled.tokenizer.eos_token_ids)
        self._executor = executor(num_threads) if batch_size > 1 and num_threads is not None else None
        self.precomputed_rows = 0
        """Masks filled from precomputed raw-text rows."""
        self.cached_rows = 0
        """Masks filled from the mask cache."""
        self.forced_rows = 0
        """Masks filled from the tokens the grammar forces (the rest by llguidance)."""
        self.words = self.masks.words
        """``uint32`` words in a row of the bitmask."""
        if cache is not None and cache.claim_warm_up():
            walk_warm_up(compiled)
        self._budget = call_budget(compiled, batch_size, budget)

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
                r.take_back(refused)
                r.consumed -= refused
                self._violate(row, token, refused)

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
        return self.masks.allows(row, token)

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
            r.roll_back_matcher(row, matched, self.compiled.matcher)
            r.take_back(matched)
        r.consumed -= matched
        if r.unmatched == 0:
            r.state = RowState.ACTIVE
            if r.ended or self._stopped(row):
                r.state = RowState.FINISHED

    # -- the mask ----------------------------------------------------------

    def mask_logits(self, logits: torch.Tensor) -> torch.Tensor:
        """Mask ``logits`` (``batch_size`` x vocabulary, any float dtype, CPU
        or CUDA) in place so that only allowed tokens stay finite; returns
        ``logits``. Columns past the tokenizer's vocabulary (padded embedding
        rows) are masked too."""
        self.prepare(logits)
        self.fill_masks()
        return self.apply(logits)

    def allowed_words(self, row: int) -> np.ndarray:
        """Row ``row`` of the host bitmask as the last :meth:`fill_masks` left
        it (``uint32`` words; token ``t`` is bit ``t % 32`` of word ``t // 32``):
        for a sampler that reads the mask without logits (``constrained.qa.fuzz``).
        A read-only view, refilled by the next :meth:`fill_masks` (which
        writes only what changed: the constraint knows what each row holds)."""
        return self.masks.read_only_row(row)

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        """Apply the filled bitmask to ``logits`` in place: upload (a
        non-blocking copy from pinned memory on CUDA), expand each mask byte
        through a 256-entry table into ``+inf``/``-inf`` per token, and take
        the elementwise minimum with the logits, so allowed logits keep their
        exact value and forbidden ones become ``-inf``. Fixed shapes, no
        allocation, capturable in a CUDA graph. On CPU, rows whose mask is
        known in short take a shorter path (:func:`.logits_mask.apply_mask`)."""
        return self.masks.apply(logits)

    def prepare(self, logits: torch.Tensor) -> None:
        """Allocate the buffers for logits shaped like ``logits`` (done by the
        first :meth:`mask_logits` call; call it yourself before capturing
        :meth:`apply` in a CUDA graph)."""
        self.masks.prepare(logits)

    def prepare_host(self) -> None:
        """Allocate the host bitmask alone, without torch, for a caller that
        reads each row's mask (:meth:`allowed_words`) and applies it itself
        (``constrained.llama_cpp``'s numpy scores, SGLang's bitmask)."""
        self.masks.prepare_host()

    def buffers(self) -> MaskBuffers:
        """The mask's buffers (:meth:`prepare` or :meth:`prepare_host` first)."""
        return self.masks.require()

    def __repr__(self) -> str:
        states = ", ".join(r.state.value for r in self.rows)
        return f"ToolCallConstraint({self.compiled.dialect!r}, batch_size={self.batch_size}, rows=[{states}])"


def fill_masks_together(constraints: Sequence[ToolCallConstraint], num_threads: int | None = None) -> None:
    """:meth:`~ToolCallConstraint.fill_masks` of several constraints (of one
    vocabulary; an engine's requests, each with its own tools). With
    ``num_threads``, the rows llguidance computes go to its thread pool in
    one call, through a scratch bitmask kept per thread; without, one after
    another (faster on few cores, see :class:`ToolCallConstraint`)."""
    ToolCallConstraint.fill_together(constraints, num_threads)
