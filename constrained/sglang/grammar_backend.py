"""The constraint as an SGLang grammar backend (``--grammar-backend constrained``).

SGLang compiles each request's grammar on its backend's thread pool, caches
it by key and gives each request a copy: a grammar object is one sequence
(it takes the sampled tokens one by one, fills its row of the batch's
packed bitmask, rolls back). Requests whose structural tag is a
:class:`~constrained.sglang.detectors.ToolsTag` (those the plug-in's
detectors constrain) get :class:`ToolCallGrammar`, the library's
constraint for one sequence, with the library's masks; every other grammar
(a ``response_format``, a regex, another detector's tag) goes to the
backend SGLang would have used, :data:`OTHER_GRAMMARS_VARIABLE` (XGrammar by
default). Both fill the same packed bitmask (token ``t`` is bit ``t % 32``
of word ``t // 32``, all ones where nothing is masked), so their requests
share a batch.

Reasoning is read from how each prompt ends (the last
:data:`~constrained.runtime.constraint.PROMPT_TAIL` tokens): a prompt that
opened a reasoning block gets a constraint that starts inside it.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from llguidance.torch import apply_token_bitmask_inplace
from sglang.srt.constrained.base_grammar_backend import BaseGrammarBackend, BaseGrammarObject, InvalidGrammarObject

from ..compiler import CompiledTools
from ..dialects import get_dialect
from ..errors import ConstrainedError, OptionError
from ..runtime.constraint import PROMPT_TAIL, RowState, ToolCallConstraint
from ..runtime.engine import ToolsRequest
from ..tokenizers import Tokenizer, load_tokenizer
from .detectors import TAG_TYPE

logger = logging.getLogger(__name__)

BACKEND_NAME = "constrained"
"""The name ``--grammar-backend`` takes."""

OTHER_GRAMMARS_VARIABLE = "CONSTRAINED_SGLANG_OTHER_GRAMMARS"
"""Which of SGLang's backends compiles the grammars that are not the
plug-in's: ``xgrammar`` (SGLang's default, the default here) or ``llguidance``."""
OTHER_GRAMMARS = ("xgrammar", "llguidance")


class ToolCallGrammar(BaseGrammarObject):
    """One request's constraint: the library's :class:`ToolCallConstraint`
    for one sequence, filling its row of SGLang's bitmask. A token the
    grammar does not allow releases the row (logged), as everywhere in the
    library's engine integrations."""

    def __init__(self, compiled: CompiledTools) -> None:
        super().__init__()
        self.compiled = compiled
        self.constraint = ToolCallConstraint(compiled, 1)
        self.constraint.prepare_host()  # SGLang applies the batch's bitmask itself

    def accept_token(self, token: int) -> None:
        if not self.constraint.is_finished(0):
            self.constraint.consume((token,))

    def rollback(self, k: int) -> None:
        self.constraint.rollback(k)

    def is_terminated(self) -> bool:
        """The calls are complete and the end token taken."""
        return self.constraint.state(0) is RowState.FINISHED

    def fill_vocab_mask(self, vocab_mask: torch.Tensor, idx: int) -> None:
        """The constraint's mask into row ``idx`` of ``vocab_mask`` (on the
        host, as SGLang fills it); words past the tokenizer's are zero."""
        self.constraint.fill_masks()
        words = self.constraint.allowed_words(0)
        row = vocab_mask[idx].numpy().view(np.uint32)
        width = min(len(row), len(words))
        row[:width] = words[:width]
        row[width:] = 0

    def copy(self) -> ToolCallGrammar:
        """A fresh sequence of the same tool set (SGLang caches one grammar
        per key and copies it for each request)."""
        return ToolCallGrammar(self.compiled)

    def try_jump_forward(self, tokenizer: Any) -> None:
        """No jump forward: the constraint's forced tokens are sampled one by one."""
        return None

    @staticmethod
    def allocate_vocab_mask(vocab_size: int, batch_size: int, device: Any) -> torch.Tensor:
        return torch.full((batch_size, (vocab_size + 31) // 32), -1, dtype=torch.int32)

    @staticmethod
    def reset_vocab_mask(vocab_mask: torch.Tensor) -> None:
        vocab_mask.fill_(-1)

    @staticmethod
    def move_vocab_mask(vocab_mask: torch.Tensor, device: Any) -> torch.Tensor:
        return vocab_mask.to(device, non_blocking=True)

    @staticmethod
    def apply_vocab_mask(logits: torch.Tensor, vocab_mask: torch.Tensor) -> None:
        apply_token_bitmask_inplace(logits, vocab_mask)

    def __repr__(self) -> str:
        return f"ToolCallGrammar({self.compiled.dialect!r}, {self.constraint.state(0).value})"


class ConstrainedGrammarBackend(BaseGrammarBackend):
    """The plug-in's grammars for the plug-in's tags, ``other``'s (an SGLang
    backend, or ``None`` for none) for the rest."""

    def __init__(self, tokenizer: Tokenizer, other: BaseGrammarBackend | None) -> None:
        super().__init__()
        self.tokenizer = tokenizer
        self.other = other

    def get_request_grammar_key(
        self, key: tuple[str, str], *, input_ids: Sequence[int], thinking_budget: int | None
    ) -> tuple[str, str]:
        """The plug-in's keys say whether the prompt opened a reasoning block."""
        tag = _own_tag(key)
        if tag is None:
            if self.other is None:
                return key
            return self.other.get_request_grammar_key(key, input_ids=input_ids, thinking_budget=thinking_budget)
        tail = self.tokenizer.decode(list(input_ids[-PROMPT_TAIL:]))
        request = tag["request"]
        if get_dialect(request["dialect"]).prompt_reasoning(tail) == "open":
            request["reasoning"] = "open"
        return key[0], json.dumps(tag, ensure_ascii=False, separators=(",", ":"))

    def dispatch_structural_tag(self, key_string: str) -> BaseGrammarObject:
        tag = _own_tag(("structural_tag", key_string))
        if tag is None:
            return self._other("structural_tag", key_string)
        try:
            compiled = ToolsRequest.from_json(json.dumps(tag["request"])).compile(self.tokenizer)
        except ConstrainedError as e:
            logger.error("a request's tools cannot be compiled: %s", e)
            return InvalidGrammarObject(str(e))
        return ToolCallGrammar(compiled)

    def dispatch_json(self, key_string: str) -> BaseGrammarObject:
        return self._other("json", key_string)

    def dispatch_regex(self, key_string: str) -> BaseGrammarObject:
        return self._other("regex", key_string)

    def dispatch_ebnf(self, key_string: str) -> BaseGrammarObject:
        return self._other("ebnf", key_string)

    def _other(self, key_type: str, key_string: str) -> BaseGrammarObject:
        if self.other is None:
            return self._not_supported(key_type, key_string)
        dispatch = getattr(self.other, f"dispatch_{key_type}")
        grammar: BaseGrammarObject = dispatch(key_string)
        return grammar

    def reset(self) -> None:
        super().reset()
        if self.other is not None:
            self.other.reset()


def _own_tag(key: tuple[str, str]) -> dict[str, Any] | None:
    """The plug-in's tag in ``key``, or ``None`` for any other grammar."""
    key_type, key_string = key
    if key_type != "structural_tag" or TAG_TYPE not in key_string:
        return None
    try:
        tag = json.loads(key_string)
    except ValueError:
        return None
    return tag if isinstance(tag, dict) and tag.get("type") == TAG_TYPE else None


def create_backend(server_args: Any, tokenizer: Any, vocab_size: int, eos_token_ids: Any = None) -> ConstrainedGrammarBackend:
    """SGLang's backend factory for ``--grammar-backend constrained``: the
    served model's tokenizer read as the library's (with the model's
    vocabulary size and end tokens), and the backend for other grammars."""
    ours = load_tokenizer(tokenizer, vocab_size=vocab_size, eos_token_ids=sorted(eos_token_ids) if eos_token_ids else None)
    return ConstrainedGrammarBackend(ours, other_backend(tokenizer, vocab_size, eos_token_ids))


def other_backend(tokenizer: Any, vocab_size: int, eos_token_ids: Any) -> BaseGrammarBackend:
    """The SGLang backend :data:`OTHER_GRAMMARS_VARIABLE` names, built as
    SGLang builds it."""
    from sglang.srt.runtime_context import get_serving

    chosen = os.environ.get(OTHER_GRAMMARS_VARIABLE, OTHER_GRAMMARS[0]).strip().lower()
    serving = get_serving()
    if chosen == "xgrammar":
        from sglang.srt.constrained.xgrammar_backend import XGrammarGrammarBackend

        return XGrammarGrammarBackend(
            tokenizer,
            vocab_size=vocab_size,
            model_eos_token_ids=list(eos_token_ids) if eos_token_ids else None,
            any_whitespace=not serving.constrained_json_disable_any_whitespace,
            max_whitespace_cnt=serving.constrained_json_max_whitespace_cnt,
        )
    if chosen == "llguidance":
        from sglang.srt.constrained.llguidance_backend import GuidanceBackend

        return GuidanceBackend(
            tokenizer=tokenizer,
            any_whitespace=not serving.constrained_json_disable_any_whitespace,
            whitespace_pattern=serving.constrained_json_whitespace_pattern,
            n_vocab=vocab_size,
            eos_token_ids=eos_token_ids,
        )
    raise OptionError(
        f"{OTHER_GRAMMARS_VARIABLE}={chosen!r}: expected one of {', '.join(OTHER_GRAMMARS)}",
        argument=OTHER_GRAMMARS_VARIABLE,
    )
