"""``constrained.runtime.generate``'s loop with a scripted stand-in for a model, so
that the bookkeeping (batches, token budget, fast-forward, end tokens) is
checked in milliseconds. The real model is in ``test_generation.py``."""

from __future__ import annotations

import functools
import json

import pytest
import torch
from stand_in_model import StandInModel

from constrained import BudgetError, compile_tools, load_tokenizer
from constrained.compiler import CompiledTools
from constrained.runtime.generate import generate
from constrained.tokenizers import Tokenizer

NOTE = {
    "name": "note",
    "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
}


@functools.cache
def tok() -> Tokenizer:
    return load_tokenizer("gemma4")


@functools.cache
def compiled() -> CompiledTools:
    return compile_tools([NOTE], "gemma4", tok(), tool_choice="note", parallel_tool_calls=False, reasoning=False)


class ScriptedModel(StandInModel):
    """Scores one preferred token per row: a row whose prompt mentions
    "short" closes the string after two ``x``; any other row writes ``x``
    forever."""

    def __init__(self) -> None:
        super().__init__(tok().vocab_size)
        self.x = tok().encode("x")[0]
        self.quote = tok().token_id('<|"|>')
        self.short = tok().encode(" short")[0]

    def preferences(self, ids: list[int]) -> dict[int, float]:
        closes = self.short in ids and ids[-2:] == [self.x, self.x]
        return {self.quote if closes else self.x: 10.0}


def test_a_row_out_of_budget_stops_cleanly_while_others_finish() -> None:
    model = ScriptedModel()
    long_row, short_row = generate(model, tok(), ["write long", "write short"], compiled(),  # type: ignore[misc]
                                   max_new_tokens=20, close_within_budget=False)
    assert short_row.finished and short_row.tool_calls and short_row.errors == []
    assert short_row.tool_calls[0]["function"]["arguments"] == '{"text": "xx"}'
    assert not long_row.finished and len(long_row.token_ids) == 20 and long_row.finish_reason == "length"
    assert long_row.events == [] and short_row.events == []  # no padding fed to a live row
    assert [e.reason for e in long_row.errors] and not long_row.tool_calls  # cut off: no call


def test_a_runaway_row_closes_its_call_in_the_last_tokens_of_its_budget() -> None:
    model = ScriptedModel()
    long_row, short_row = generate(model, tok(), ["write long", "write short"], compiled(), max_new_tokens=20)  # type: ignore[misc]
    assert short_row.tool_calls[0]["function"]["arguments"] == '{"text": "xx"}'  # untouched: it closed by itself
    assert not short_row.closed_by_budget and short_row.finish_reason == "tool_calls"
    assert long_row.errors == [] and long_row.events == [] and len(long_row.token_ids) <= 20
    text = json.loads(long_row.tool_calls[0]["function"]["arguments"])["text"]
    closing = len(tok().encode('<|"|>}<tool_call|>'))
    assert text == "x" * (20 - len(tok().encode('<|tool_call>call:note{text:<|"|>')) - closing)  # every token it could write
    assert long_row.closed_by_budget and long_row.finish_reason == "length"


def test_a_budget_no_call_fits_is_refused_before_the_model_runs() -> None:
    model = ScriptedModel()
    needed = len(tok().encode('<|tool_call>call:note{text:<|"|><|"|>}<tool_call|>'))
    with pytest.raises(BudgetError, match=f"a budget of 5 tokens cannot hold a complete output.*needs {needed} tokens"):
        generate(model, tok(), "write long", compiled(), max_new_tokens=5)
    assert model.fed == []
    result = generate(model, tok(), "write long", compiled(), max_new_tokens=5, close_within_budget=False)
    assert not isinstance(result, list) and len(result.token_ids) == 5 and result.finish_reason == "length"


def test_fast_forward_feeds_forced_tokens_with_the_prompt_and_after_the_string() -> None:
    model = ScriptedModel()
    result = generate(model, tok(), "write short", compiled(), max_new_tokens=40)
    assert not isinstance(result, list) and result.stats is not None
    text = result.text
    assert text == '<|tool_call>call:note{text:<|"|>xx<|"|>}<tool_call|>'
    forced_prefix = len(tok().encode('<|tool_call>call:note{text:<|"|>'))
    assert model.fed[0] == result.stats.prompt_tokens + forced_prefix  # prompt and forced prefix in one pass
    assert result.stats.forward_passes == len(model.fed) < len(result.token_ids)
    slow = ScriptedModel()
    same = generate(slow, tok(), "write short", compiled(), max_new_tokens=40, fast_forward=False)
    assert not isinstance(same, list) and same.token_ids == result.token_ids
    assert len(slow.fed) == len(same.token_ids)


def test_unconstrained_loop_runs_the_model_as_it_is() -> None:
    result = generate(ScriptedModel(), tok(), "write long", compiled(), max_new_tokens=5, constrain=False)
    assert not isinstance(result, list)
    assert result.token_ids == [tok().encode("x")[0]] * 5 and result.stats is not None
    assert result.stats.forced_tokens == 0


def test_bad_budget_is_refused() -> None:
    with pytest.raises(ValueError, match="max_new_tokens"):
        generate(ScriptedModel(), tok(), "hi", compiled(), max_new_tokens=0)


def test_top_p_keeps_the_smallest_head_of_tokens_reaching_p() -> None:
    from constrained.runtime.generate import _Sampler

    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    seen = {p: {int(_Sampler(True, 1.0, 0, p, seed)(logits)) for seed in range(300)} for p in (0.45, 0.7, 0.85)}
    assert seen == {0.45: {0}, 0.7: {0, 1}, 0.85: {0, 1, 2}}
