"""``ToolCallLogitsProcessor`` driven the way ``model.generate`` drives it
(growing ``input_ids``, scores per step), without a model: it follows each
row, starts over on a new prompt, stops rows whose grammar is complete, and
refuses beam search's reordering. The real-model runs are in
``test_generation.py``."""

from __future__ import annotations

import functools

import pytest
import torch

from constrained import ToolCallLogitsProcessor, compile_tools, load_tokenizer, render_tool_calls
from constrained.compiler import CompiledTools
from constrained.errors import GenerationError

WEATHER = {
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


@functools.cache
def compiled() -> CompiledTools:
    return compile_tools([WEATHER], "gemma4", load_tokenizer("gemma4"), tool_choice="required", reasoning=False)


def output_tokens() -> list[int]:
    ct = compiled()
    text = render_tool_calls([{"name": "get_weather", "arguments": {"city": "Oslo"}}], [WEATHER], "gemma4")
    return ct.tokenizer.encode(text) + [ct.tokenizer.token_id("<|tool_response>")]


def drive(processor: ToolCallLogitsProcessor, prompt: torch.Tensor, outputs: list[list[int]]) -> list[torch.Tensor]:
    """Call the processor and its stopping criterion as generate does, feeding
    ``outputs[r][step]`` as row r's chosen token; returns the masked scores."""
    vocab = compiled().tokenizer.vocab_size
    stop = processor.stopping_criteria()
    ids = prompt
    seen = []
    for step in range(len(outputs[0])):
        scores = torch.zeros(ids.shape[0], vocab)
        seen.append(processor(ids, scores))
        ids = torch.cat([ids, torch.tensor([[row[step]] for row in outputs])], dim=1)
        stop(ids, scores)
    return seen


def test_processor_masks_each_step_and_stops_when_the_grammar_is_complete() -> None:
    processor = ToolCallLogitsProcessor(compiled())
    tokens = output_tokens()
    masked = drive(processor, torch.tensor([[2, 105, 9259]]), [tokens])
    for scores, token in zip(masked, tokens):
        assert torch.isfinite(scores[0, token])
    assert torch.isfinite(masked[0][0]).sum() == 1  # <|tool_call> is forced first
    stop = processor.stopping_criteria()
    ids = torch.tensor([[2, 105, 9259] + tokens])
    assert stop(ids, None).tolist() == [True]
    assert processor.constraint is not None and processor.constraint.events == []


def test_disabled_processor_returns_scores_untouched() -> None:
    processor = ToolCallLogitsProcessor(compiled(), enabled=False)
    scores = torch.randn(1, compiled().tokenizer.vocab_size)
    original = scores.clone()
    assert processor(torch.tensor([[2, 105]]), scores) is scores
    assert torch.equal(scores, original)
    assert processor.constraint is None
    assert processor.stopping_criteria()(torch.tensor([[2, 105, 7]]), scores).tolist() == [False]


def test_a_new_prompt_starts_over() -> None:
    processor = ToolCallLogitsProcessor(compiled())
    tokens = output_tokens()
    drive(processor, torch.tensor([[2, 105, 9259]]), [tokens[:5]])
    first = processor.constraint
    # A second generate call whose prompt is one token longer than the
    # first call's whole sequence: other tokens where the prompt ended.
    prompt = torch.tensor([[2, 105, 77] + tokens[:5] + [9]])
    scores = torch.zeros(1, compiled().tokenizer.vocab_size)
    processor(prompt, scores)
    assert processor.constraint is not first
    assert torch.isfinite(scores[0]).sum() == 1 and torch.isfinite(scores[0, tokens[0]])


def test_rows_reordered_between_steps_are_refused_as_beam_search() -> None:
    processor = ToolCallLogitsProcessor(compiled())
    tokens = output_tokens()
    prompt = torch.tensor([[2, 105, 9259], [2, 105, 9259]])
    drive(processor, prompt, [tokens[:3], tokens[:3]])
    history = [2, 105, 9259] + tokens[:3] + [tokens[3]]
    swapped = torch.tensor([history, history])
    swapped[0, -2] = 7  # row 0 now continues a history the constraint did not see
    with pytest.raises(GenerationError, match="beam search is not supported"):
        processor(swapped, torch.zeros(2, compiled().tokenizer.vocab_size))


@pytest.mark.parametrize("dialect, tokenizer", [("gemma4", "gemma4"), ("qwen3_coder", "qwen3")])
def test_the_tables_a_tokenizer_needs_are_built_with_the_processor_not_in_its_steps(monkeypatch, dialect, tokenizer) -> None:
    """A fresh process's first call steps as fast as its second: the raw-text
    masks, the sorted vocabulary and the guards' token lists are built when
    the processor is made, so a step that enters a string value builds none."""
    from constrained.runtime import text_masks

    for cache in (text_masks._masks, text_masks._vocabularies, text_masks._guard_sets):
        cache.clear()
    ct = compile_tools([WEATHER], dialect, load_tokenizer(tokenizer), tool_choice="required", reasoning=False)
    processor = ToolCallLogitsProcessor(ct)
    assert len(text_masks._masks)

    def built_in_a_step(*args, **kwargs):
        raise AssertionError("a table was built inside a decoding step")

    monkeypatch.setattr(text_masks.TextFrameMasks, "build", built_in_a_step)
    monkeypatch.setattr(text_masks._Vocabulary, "__init__", built_in_a_step)
    monkeypatch.setattr(text_masks._Vocabulary, "long_tokens", lambda self, shortest: self._long[shortest])
    text = render_tool_calls([{"name": "get_weather", "arguments": {"city": "Oslo <b>"}}], [WEATHER], dialect)
    vocab = ct.tokenizer.vocab_size
    tokens = ct.tokenizer.encode(text)
    for step in range(len(tokens)):
        processor(torch.tensor([[0, *tokens[:step]]]), torch.zeros(1, vocab))
    assert processor.constraint is not None and processor.constraint.precomputed_rows > 0


def test_making_a_processor_warms_its_tool_set_s_mask_cache() -> None:
    """The masks a tool set's requests start with are computed when the
    processor is made, not in its first decoding step: the first step then
    finds its mask cached."""
    tools = compiled()
    object.__setattr__(tools, "_masks", None)
    processor = ToolCallLogitsProcessor(tools)
    cache = tools._masks
    assert cache is not None and cache.masks > 0
    kept = cache.misses
    processor(torch.tensor([[0]]), torch.zeros(1, tools.tokenizer.vocab_size))
    assert cache.misses == kept and cache.hits > 0
