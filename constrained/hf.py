"""transformers generation hook: ``ToolCallLogitsProcessor``.

``model.generate`` calls a logits processor with every row's tokens so far
and the next-token scores; the processor feeds each row's newest token to the
constraint and masks the scores in place. Its :meth:`stopping_criteria` ends a
row as soon as its grammar is complete (transformers only knows the model's
own end tokens, not the dialect's end-of-calls marker).

Sampling, greedy search and batches work. Beam search reorders rows between
steps, which a per-row constraint cannot follow; it is detected (a row whose
previous token is not the one the constraint consumed) and raises
:class:`~constrained.errors.GenerationError`.

Importing this module needs neither torch nor transformers; making a
processor needs torch (the ``transformers`` extra, ``pip install
'constrained[transformers]'``), else it raises
:class:`~constrained.errors.MissingExtraError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import TRANSFORMERS_EXTRA, GenerationError, MissingExtraError
from .runtime.budget import require_budget
from .runtime.constraint import PROMPT_TAIL, OnViolation, ToolCallConstraint, compiled_for_prompts, warm_mask_cache
from .runtime.frame_tracker import prepare_tables

if TYPE_CHECKING:
    import torch

    from .compiler import CompiledTools


class ToolCallLogitsProcessor:
    """A transformers ``LogitsProcessor`` for ``model.generate``.

    One processor serves one ``generate`` call at a time; it starts over when
    it sees a new prompt (call :meth:`reset` to be explicit). Its
    :attr:`constraint` holds the rows' states and violation events. ``enabled=False`` returns the scores untouched and
    consumes nothing, so generation is exactly what it is without it.
    ``budget``: pass the same ``max_new_tokens`` as to ``generate`` and
    every call closes within it (:class:`~constrained.ToolCallConstraint`).
    """

    def __init__(
        self,
        compiled: CompiledTools,
        *,
        enabled: bool = True,
        on_violation: OnViolation = "unconstrained",
        budget: int | None = None,
    ) -> None:
        MissingExtraError.require("ToolCallLogitsProcessor", TRANSFORMERS_EXTRA, "torch")
        self.compiled = compiled
        self.enabled = enabled
        self.budget = budget
        if budget is not None:
            require_budget(compiled, budget)
        self.on_violation: OnViolation = on_violation
        self.constraint: ToolCallConstraint | None = None
        self._length = 0  # tokens per row (prompt included) the constraint has seen
        self._last: list[int] = []  # each row's last consumed token
        self._prompt_length = 0
        self._prompt_end: list[int] = []  # each row's last prompt token
        # Here, not in the first step: the raw-text tables, and the masks
        # the tool set's requests start with (a prompt that needs another
        # variant of the set, e.g. inside a reasoning block, warms that one
        # when its first constraint is made).
        prepare_tables(compiled.tokenizer, compiled.dialect)
        warm_mask_cache(compiled)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if not self.enabled:
            return scores
        constraint = self.sync(input_ids)
        constraint.mask_logits(scores)
        return scores

    def sync(self, input_ids: torch.Tensor) -> ToolCallConstraint:
        """Feed the constraint every row's newest token it has not seen yet;
        start over on a new prompt (a length that is not one more than last
        time, or other tokens where the prompt ended)."""
        batch, length = input_ids.shape
        constraint = self.constraint
        if constraint is None or constraint.batch_size != batch or length not in (self._length, self._length + 1):
            return self._start(input_ids)
        if length == self._length:
            return constraint
        # Read through numpy on CPU: torch's indexing costs microseconds a call.
        ids = input_ids.numpy() if input_ids.device.type == "cpu" else input_ids
        prompt_end = ids[:, self._prompt_length - 1].tolist()
        previous, newest = (list(column) for column in zip(*ids[:, length - 2 :].tolist()))
        if prompt_end != self._prompt_end:
            return self._start(input_ids)
        expected = self._last or self._prompt_end
        if previous != expected:
            row = next(r for r, (a, b) in enumerate(zip(previous, expected)) if a != b)
            raise GenerationError(
                f"row {row} was reordered between steps (its previous token is {previous[row]}, "
                f"the constraint consumed {expected[row]}): beam search is not supported; "
                "use greedy search or sampling (num_beams=1)"
            )
        constraint.consume(newest)
        self._last = newest
        self._length = length
        return constraint

    def reset(self) -> None:
        """Forget the current generation (the next call starts over)."""
        self.constraint = None
        self._length = 0
        self._last = []

    def _start(self, input_ids: torch.Tensor) -> ToolCallConstraint:
        batch, length = input_ids.shape
        tails = [self.compiled.tokenizer.decode(tail) for tail in input_ids[:, -PROMPT_TAIL:].tolist()]
        compiled = compiled_for_prompts(self.compiled, tails)
        self.constraint = ToolCallConstraint(compiled, batch, on_violation=self.on_violation, budget=self.budget)
        self._length = self._prompt_length = length
        self._prompt_end = input_ids[:, -1].tolist()
        self._last = []
        return self.constraint

    def stopping_criteria(self) -> ToolCallStoppingCriteria:
        """A stopping criterion for the same ``generate`` call."""
        return ToolCallStoppingCriteria(self)


class ToolCallStoppingCriteria:
    """Ends a row once its grammar is complete (or a violation stopped it).
    Pass it as ``stopping_criteria=[processor.stopping_criteria()]``."""

    def __init__(self, processor: ToolCallLogitsProcessor) -> None:
        MissingExtraError.require("ToolCallStoppingCriteria", TRANSFORMERS_EXTRA, "torch")
        self.processor = processor

    def __call__(self, input_ids: torch.Tensor, scores: Any, **kwargs: Any) -> torch.Tensor:
        import torch

        if not self.processor.enabled or self.processor.constraint is None:
            return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        constraint = self.processor.sync(input_ids)
        return torch.tensor(constraint.finished, dtype=torch.bool, device=input_ids.device)
