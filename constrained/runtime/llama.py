"""The constraint in llama.cpp, through llama-cpp-python: numpy, no torch.

llama-cpp-python calls each logits processor once per sampled token with
the tokens evaluated so far (the prompt, then every sampled token once the
model has read it) and the next token's scores: a float32 numpy array of
one score per vocabulary entry, possibly a strided view, masked in place.
:class:`ToolCallLogitsProcessor` follows the sampled tokens from those ids
(or from :meth:`~ToolCallLogitsProcessor.feed`, for a loop that sees each
token first), fills its constraint's packed bitmask on the host
(:meth:`ToolCallConstraint.prepare_host`) and sets every forbidden score to
``-inf`` (:class:`ScoresMask`). llama.cpp ends a generation only at its
model's end-of-generation tokens, which are not every dialect's (Gemma 4's
call markers sit in slots the GGUF does not know), so the processor also
says when the calls are complete (:meth:`~ToolCallLogitsProcessor.stop`,
a stopping criterion).

:func:`generate_with_llama` is :func:`~constrained.runtime.generate.generate`'s
loop for ``engine="llama-cpp"``: llama.cpp samples (greedy or with
temperature, top-k and top-p, seeded), one prompt after another.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from ..compiler import CompiledTools
from ..errors import ConstraintError
from .budget import require_budget
from .constraint import PROMPT_TAIL, ConstraintEvent, OnViolation, ToolCallConstraint

_FORBIDDEN_BITS = (np.arange(256)[:, None] >> np.arange(8) & 1) == 0
"""Row ``b``: which of the 8 tokens a mask byte ``b`` covers it forbids
(little-endian bit order, as llguidance packs tokens)."""


class ScoresMask:
    """A packed bitmask row applied to numpy scores in place, with nothing
    allocated per step: each mask byte indexes :data:`_FORBIDDEN_BITS` into
    a buffer kept between steps, and the scores it flags become ``-inf``
    (allowed scores keep their exact value). Scores past the mask's tokens
    (padded vocabulary rows) are forbidden too."""

    def __init__(self, words: int) -> None:
        self._flags = np.empty((words * 4, 8), dtype=bool)
        self._tokens = words * 32

    def apply(self, words: np.ndarray, scores: np.ndarray) -> None:
        np.take(_FORBIDDEN_BITS, words.view(np.uint8), axis=0, out=self._flags)
        width = min(len(scores), self._tokens)
        np.copyto(scores[:width], -np.inf, where=self._flags.reshape(-1)[:width])
        if len(scores) > width:
            scores[width:] = -np.inf


class ToolCallLogitsProcessor:
    """The constraint for one llama-cpp-python generation: pass it as a
    logits processor and its :meth:`stop` as a stopping criterion::

        processor = ToolCallLogitsProcessor(compiled)
        llm.create_completion(prompt_ids, logits_processor=LogitsProcessorList([processor]),
                              stopping_criteria=StoppingCriteriaList([processor.stop]))

    The first call reads the prompt's last tokens for reasoning the prompt
    opened (:meth:`CompiledTools.after_prompt`). One processor serves one
    generation: a new prompt needs a new processor. ``budget`` (the
    generation's ``max_tokens``) makes calls close within it, as
    :class:`ToolCallConstraint`'s does."""

    def __init__(self, compiled: CompiledTools, *, on_violation: OnViolation = "unconstrained",
                 budget: int | None = None) -> None:
        self.compiled = compiled
        self.on_violation: OnViolation = on_violation
        self.budget = budget
        if budget is not None:
            require_budget(compiled, budget)  # here: llama.cpp would swallow it inside its loop
        self.constraint: ToolCallConstraint | None = None
        self._prompt_length = 0
        self._fed = 0
        self._mask = ScoresMask((compiled.tokenizer.vocab_size + 31) // 32)

    def __call__(self, input_ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
        constraint = self._follow(input_ids)
        constraint.fill_masks()
        self._mask.apply(constraint.allowed_words(0), scores)
        return scores

    def stop(self, input_ids: np.ndarray, logits: np.ndarray) -> bool:
        """The stopping criterion: the calls are complete and their end
        token taken. llama-cpp-python asks before the last sampled token is
        read into ``input_ids``, so it stops one step after that token (which
        it has already returned)."""
        return self._follow(input_ids).is_finished(0)

    def feed(self, token: int) -> None:
        """Take a sampled token before llama.cpp reads it into the ids the
        next call brings (a loop of one's own, as :func:`generate_with_llama`)."""
        if self.constraint is None:
            raise ConstraintError("feed() before the first mask: the processor has not seen the prompt yet")
        if not self.constraint.is_finished(0):
            self.constraint.consume((token,))
        self._fed += 1

    @property
    def finished(self) -> bool:
        return self.constraint is not None and self.constraint.is_finished(0)

    @property
    def closed_by_budget(self) -> bool:
        return self.constraint is not None and self.constraint.closed_by_budget(0)

    @property
    def events(self) -> list[ConstraintEvent]:
        return self.constraint.events if self.constraint is not None else []

    def _follow(self, input_ids: Sequence[int] | np.ndarray) -> ToolCallConstraint:
        """The constraint, caught up on the tokens sampled since the last call."""
        if self.constraint is None:
            tail = self.compiled.tokenizer.decode([int(t) for t in input_ids[-PROMPT_TAIL:]])
            self.constraint = ToolCallConstraint(self.compiled.after_prompt(tail), 1, on_violation=self.on_violation,
                                                 budget=self.budget)
            self.constraint.prepare_host()
            self._prompt_length = len(input_ids)
            return self.constraint
        known = self._prompt_length + self._fed
        if len(input_ids) < known:
            raise ConstraintError(
                f"the generation holds {len(input_ids)} tokens, fewer than the {known} this processor has followed: "
                "use a new processor for each generation"
            )
        for token in input_ids[known:]:
            self.feed(int(token))
        return self.constraint


class LlamaRun(NamedTuple):
    """One prompt's run under :func:`generate_with_llama`."""

    output: list[int]
    finished: bool
    """The grammar finished the output."""
    closed_by_budget: bool
    events: list[ConstraintEvent]
    seconds: float
    prefill: float


def generate_with_llama(
    llm: Any,
    compiled: CompiledTools,
    prompts: Sequence[list[int]],
    *,
    max_new_tokens: int,
    sampling: dict[str, Any],
    constrain: bool,
    on_violation: OnViolation,
    end_ids: frozenset[int],
    budget: int | None = None,
) -> list[LlamaRun]:
    """Each prompt's run. ``sampling``: llama-cpp-python's sampling
    arguments; ``budget``: the constraint's (:class:`ToolCallLogitsProcessor`)."""
    from llama_cpp import LogitsProcessorList

    runs = []
    for prompt in prompts:
        processor = ToolCallLogitsProcessor(compiled, on_violation=on_violation, budget=budget) if constrain else None
        processors = LogitsProcessorList([processor] if processor is not None else [])
        output: list[int] = []
        started = time.perf_counter()
        prefill = 0.0
        for token in llm.generate(prompt, logits_processor=processors, **sampling):
            if not output:
                prefill = time.perf_counter() - started
            output.append(token)
            if processor is not None:
                processor.feed(token)
            if token in end_ids or (processor is not None and processor.finished) or len(output) >= max_new_tokens:
                break
        if processor is None:
            runs.append(LlamaRun(output, False, False, [], time.perf_counter() - started, prefill))
        else:
            runs.append(LlamaRun(output, processor.finished, processor.closed_by_budget, processor.events,
                                 time.perf_counter() - started, prefill))
    return runs
