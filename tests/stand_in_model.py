"""A stand-in for a transformers causal LM, for ``generate``'s loop: the
scores of each step come from a rule over each row's tokens so far, so a
test says what the "model" prefers and checks the loop in milliseconds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


@dataclass
class StepOutput:
    logits: torch.Tensor
    past_key_values: Any

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)


class StandInModel:
    """Scores each row by :meth:`preferences` of its tokens so far (prompt
    included); 0 for every other token. Counts the tokens each forward pass
    was fed (:attr:`fed`). The "cache" is the history itself."""

    device = torch.device("cpu")
    generation_config = None

    def __init__(self, vocab_size: int) -> None:
        self.vocab_size = vocab_size
        self.fed: list[int] = []

    def preferences(self, ids: list[int]) -> dict[int, float]:
        raise NotImplementedError

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor,
                use_cache: bool, logits_to_keep: int, past_key_values: Any = None) -> StepOutput:
        history = input_ids if past_key_values is None else torch.cat([past_key_values, input_ids], dim=1)
        self.fed.append(input_ids.shape[1])
        logits = torch.zeros(input_ids.shape[0], 1, self.vocab_size)
        for row, ids in enumerate(history.tolist()):
            for token, score in self.preferences(ids).items():
                logits[row, 0, token] = score
        return StepOutput(logits, history)

    __call__ = forward
