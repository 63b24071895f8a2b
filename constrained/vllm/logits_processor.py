"""The constraint as a vLLM (V1 engine) logits processor.

vLLM keeps a persistent batch and tells a processor, before each step,
which requests joined (with their sampling parameters and a live reference
to their output tokens), left or moved. A request is constrained when its
``extra_args`` hold a :class:`~constrained.runtime.engine.ToolsRequest`,
which the plug-in's tool parsers put there, so an ordinary OpenAI client
sends nothing extra; every other row is left untouched. Compiling is cached
by tool set, and the tokenizer is the served model's own.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor, MoveDirectionality

from ..errors import ConstrainedError
from ..runtime.engine import EXTRA_ARGS_KEY, EngineRows, ToolsRequest
from ..tokenizers import Tokenizer, load_tokenizer

logger = logging.getLogger(__name__)


class ToolCallLogitsProcessor(LogitsProcessor):
    """Masks the rows of requests with tools so that only tool calls their
    schemas allow (and text, under ``tool_choice`` auto) can be sampled.
    Load it with ``--logits-processors constrained.vllm:ToolCallLogitsProcessor``."""

    def __init__(self, vllm_config: Any, device: torch.device, is_pin_memory: bool) -> None:
        model_config = vllm_config.model_config
        self._tokenizer_source = model_config.tokenizer
        self._vocab_size = model_config.get_vocab_size()
        self._tokenizer: Tokenizer | None = None
        self.rows = EngineRows()

    @classmethod
    def validate_params(cls, sampling_params: Any) -> None:
        """A malformed description is the client's error (HTTP 400)."""
        described = (sampling_params.extra_args or {}).get(EXTRA_ARGS_KEY)
        if described is not None:
            ToolsRequest.from_json(described)

    def is_argmax_invariant(self) -> bool:
        return False

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        if batch_update is None:
            return
        for index in batch_update.removed:
            self.rows.remove(index)
        for index, params, _prompt_ids, output_ids in batch_update.added:
            self.rows.remove(index)
            described = (params.extra_args or {}).get(EXTRA_ARGS_KEY)
            if described is not None:
                self._add(index, described, output_ids)
        for source, target, direction in batch_update.moved:
            self.rows.move(source, target, swap=direction == MoveDirectionality.SWAP)

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        if not len(self.rows):
            return logits
        return self.rows.apply(logits)

    def _add(self, index: int, described: str, output_ids: list[int]) -> None:
        """Constrain the request at ``index``; one that cannot be compiled
        here (the front end checked its tools, so this is rare) is served
        unconstrained and logged, never failing the engine's step."""
        try:
            compiled = ToolsRequest.from_json(described).compile(self._served_tokenizer())
        except ConstrainedError as e:
            logger.error("request at batch row %d runs unconstrained: %s", index, e)
            return
        self.rows.add(index, compiled, output_ids)

    def _served_tokenizer(self) -> Tokenizer:
        if self._tokenizer is None:
            self._tokenizer = load_tokenizer(self._tokenizer_source, vocab_size=self._vocab_size)
        return self._tokenizer
