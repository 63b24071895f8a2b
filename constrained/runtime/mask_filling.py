"""How a :class:`~constrained.runtime.constraint.ToolCallConstraint` fills
its rows' masks at each step.

The fast part of a step, apart from feeding tokens: each active row's mask
comes, in this order, from the precomputed raw-text rows (a value of any
text), the tool set's mask cache, the tokens the grammar forces, or
llguidance (one row after another, or on its thread pool); llguidance's
masks are then kept in the cache and the rows near the end of their budget
narrowed (:mod:`.budget`). :class:`MaskFilling` is the constraint's base
class holding this half, so the class that feeds tokens stays readable;
it reads the constraint's rows and fills its :class:`.host_masks.HostMasks`.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ArgumentError
from .host_masks import HostMasks, Pending, executor, scratch
from .mask_cache import single_token, write_token
from .row import Row, RowState
from .text_masks import ALL_ALLOWED

if TYPE_CHECKING:
    from .budget import CallBudget
    from .cache_walk import CacheWalk, Words

MISSES_IN_A_ROW = 32
"""After this many cache misses in a row whose masks allow several tokens,
in text the cache keys on (like a long string under a pattern), a sequence
stops keeping and looking up masks."""

_ACTIVE, _RELEASED = RowState.ACTIVE, RowState.RELEASED


class MaskFilling:
    """The mask-filling half of the constraint (see the module)."""

    rows: list[Row]
    masks: HostMasks
    walk: CacheWalk
    words: int
    batch_size: int
    precomputed_rows: int
    cached_rows: int
    forced_rows: int
    _budget: CallBudget | None
    _executor: Any

    if TYPE_CHECKING:  # the feeding half's, which the subclass defines

        def _catch_up(self, row: int) -> None: ...

        def _forced_from(self, row: int) -> list[int]: ...

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
                                                   self.masks.require().host_address, self.words * 4, self.batch_size)
        self._settle(pending)

    @staticmethod
    def fill_together(constraints: Sequence[MaskFilling], num_threads: int | None = None) -> None:
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
            bits = scratch(len(work), words)
            executor(num_threads).unsafe_compute_mask_ptr(
                [(item.matcher, index) for index, (_, item) in enumerate(work)], bits.ctypes.data, words * 4, len(work)
            )
            for index, (constraint, item) in enumerate(work):
                np.copyto(constraint.masks.require().host_words[item.row], bits[index])
        for constraint, items in zip(constraints, pending):
            constraint._settle(items)

    def _steer(self) -> None:
        """Rows near the end of their budget: only what closes within it
        (:mod:`.budget`)."""
        assert self._budget is not None
        masks = self.masks
        buffers = masks.require()
        words = buffers.host_words
        for row, r in enumerate(self.rows):
            if r.state is _ACTIVE and self._budget.narrow(row, r.consumed, words[row], partial(self._caught_up, row)):
                masks.forget(row)
                if r.state is _RELEASED:  # catching up met a violation
                    words[row].fill(ALL_ALLOWED)
                elif r.state is not _ACTIVE:
                    np.copyto(words[row], buffers.end_words)
                else:
                    masks.single[row] = single_token(words[row])

    def _computing(self, row: int) -> None:
        """Note that llguidance computes the row's mask now (:meth:`_roll_back_matcher`)."""
        r = self.rows[row]
        r.mask_at = r.consumed

    def _compute(self, matcher: Any, row: int) -> None:
        """llguidance's mask for ``row`` into the host bitmask (the address
        from torch: numpy's ``ctypes`` costs about 3 us a call)."""
        row_bytes = self.words * 4
        self._computing(row)
        matcher.unsafe_compute_mask_ptr(self.masks.require().host_address + row * row_bytes, row_bytes)

    def _fill_known(self) -> list[Pending]:
        """Fill the rows whose mask is known without llguidance (raw-text
        rows, the mask cache, finished and released rows); return the
        others. The hot path of every step: locals over attribute lookups."""
        masks = self.masks
        buffers = masks.require()
        words = buffers.host_words
        pending: list[Pending] = []
        forbidden, single, holding = masks.forbidden, masks.single, masks.holding
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
        masks = self.masks
        node = r.node
        tracker = r.tracker
        if tracker is not None and tracker.in_text_frame:
            start = r.value_start
            if start is not None and start.crossings is None:  # a violation there is met below
                self.walk.learn_crossings(r, start, partial(self._ready_matcher, row))
            # partial, made per step: kept on self it would be a cycle that outlives the request
            masks.forbidden[row], masks.holding[row] = tracker.fill(words, partial(self._crossing, row), held)
            self.precomputed_rows += 1
        elif node is not None and (mask := node.mask) is not None:
            cache = self.walk.cache
            assert cache is not None
            masks.forbidden[row] = cache.write(node, words, held)
            masks.holding[row] = mask
            masks.single[row] = mask if isinstance(mask, int) else None
            self.cached_rows += 1
            r.misses = 0
        elif forced := self._forced_from(row):
            # llguidance's mask where bytes are forced allows just the first
            # token of their tokenization (the fuzzer's crosscheck compares the two).
            masks.single[row] = masks.holding[row] = token = forced[0]
            write_token(words, token, held)
            if node is not None:
                assert self.walk.cache is not None
                self.walk.cache.keep_token(node, token)
            self.forced_rows += 1
        elif r.state is _ACTIVE:
            pending.append(Pending(r.matcher, row, node))
        if r.state is not _ACTIVE:  # catching up met a violation
            r.masked = False
            masks.forget(row)
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
        masks = self.masks
        buffers = masks.require()
        cpu, cache = buffers.cpu, self.walk.cache
        for _, row, node in pending:
            if node is None:
                masks.single[row] = masks.holding[row] = single_token(buffers.host_words[row]) if cpu else None
                continue
            assert cache is not None
            masks.single[row] = cache.store(node, buffers.host_words[row])
            masks.holding[row] = node.mask  # the row the cache kept is a copy of the host's
            r = self.rows[row]
            if masks.single[row] is None and r.keyed_on_text():  # a forced token costs nothing to keep
                r.misses += 1
                if r.misses >= MISSES_IN_A_ROW:
                    r.node = r.value_start = None
