"""The grammar backend as SGLang's scheduler drives it: keys from the
serving layer, grammars compiled on the backend's pool and cached by key
(each request a copy), a batch's bitmask filled and applied by SGLang's
own ``SamplingBatchInfo``, tokens accepted, rolled back, finished. Rows of
the plug-in's requests carry exactly the library's masks; other grammars
go to the other backend (llguidance here) and share the batch."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
import torch
from sglang.srt.constrained.base_grammar_backend import BaseGrammarObject, InvalidGrammarObject
from sglang.srt.constrained.llguidance_backend import GuidanceBackend, GuidanceGrammar
from sglang.srt.entrypoints.openai.protocol import ChatCompletionRequest, ToolChoice
from sglang.srt.function_call.function_call_parser import FunctionCallParser
from sglang.srt.sampling.sampling_batch_info import SamplingBatchInfo
from sglang_tools import NOTE, WEATHER, sglang_tools

import constrained.sglang
from constrained import compile_tools, load_tokenizer, render_tool_calls
from constrained.runtime.constraint import ToolCallConstraint
from constrained.sglang import ConstrainedGrammarBackend, ToolCallGrammar

constrained.sglang.register()

TOK = load_tokenizer("qwen3")
PROMPT = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


@pytest.fixture
def backend() -> ConstrainedGrammarBackend:
    return ConstrainedGrammarBackend(TOK, GuidanceBackend(tokenizer=TOK.hf, n_vocab=TOK.vocab_size))


def tag_key(dialect: str, tools: list[dict[str, Any]], choice: Any) -> tuple[str, str]:
    """The key SGLang's serving layer gives the scheduler for a request."""
    reader = FunctionCallParser(sglang_tools(tools), f"constrained_{dialect}")
    constraint = reader.get_structure_constraint(choice)
    request = ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "hi"}], tools=tools, tool_choice=choice)
    sampling = request.to_sampling_params(stop=[], model_generation_config={}, tool_call_constraint=constraint)
    return "structural_tag", sampling["structural_tag"]


def grammar(backend: ConstrainedGrammarBackend, key: tuple[str, str], prompt: str = PROMPT) -> BaseGrammarObject:
    """What the scheduler's grammar manager gives a request: compiled on
    the pool the first time (and cached), a copy of the cached one after."""
    key = backend.get_request_grammar_key(key, input_ids=TOK.encode(prompt), thinking_budget=None)
    value, hit = backend.get_cached_or_future_value(key, False)
    if not hit:
        value = value.result()
        backend.set_cache(key, value.copy())
    return value


def allowed(words: np.ndarray) -> np.ndarray:
    """A packed bitmask row as one boolean per token of the vocabulary."""
    return np.unpackbits(np.ascontiguousarray(words).view(np.uint8), bitorder="little")[: TOK.vocab_size].astype(bool)


class Request:
    """A request of the simulated batch: its grammar, the tokens it will
    sample, and (for the plug-in's requests) the library's own constraint
    fed the same tokens, for the masks it must equal."""

    def __init__(self, grammar: BaseGrammarObject, text: str, reference: ToolCallConstraint | None) -> None:
        self.grammar = grammar
        self.tokens = [*TOK.encode(text), TOK.eos_token_ids[0]]
        self.reference = reference
        if reference is not None:
            reference.prepare_host()
        self.fed = 0

    @property
    def done(self) -> bool:
        return self.fed == len(self.tokens)


def step(requests: list[Request]) -> None:
    """One decoding step through SGLang's ``SamplingBatchInfo``: the batch's
    mask filled and applied to the logits, then each row's token accepted."""
    batch = SamplingBatchInfo.__new__(SamplingBatchInfo)
    batch.grammars = [request.grammar for request in requests]
    batch.temperatures = torch.ones(len(requests), 1)
    batch.vocab_size = TOK.vocab_size
    batch.device = "cpu"
    batch.update_regex_vocab_mask()
    logits = torch.zeros(len(requests), TOK.vocab_size)
    batch.grammar_mask.apply(logits)
    for row, request in enumerate(requests):
        finite = torch.isfinite(logits[row]).numpy()
        token = request.tokens[request.fed]
        assert finite[token], f"row {row}: token {token} ({TOK.decode([token])!r}) is masked"
        assert not finite.all(), f"row {row} is not masked"
        if request.reference is not None:
            request.reference.fill_masks()
            assert (finite == allowed(request.reference.allowed_words(0))).all(), f"row {row} differs from the library"
            request.reference.consume((token,))
        request.grammar.accept_token(token)
        request.fed += 1


def test_a_simulated_batch_gets_exactly_the_librarys_masks(backend):
    calls = [{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}]
    named = ToolChoice(function={"name": "add_note"})
    note = [{"name": "add_note", "arguments": {"text": '{"looks": "like JSON"}\nline two'}}]
    requests = [
        Request(grammar(backend, tag_key("qwen3_coder", [WEATHER, NOTE], "auto")),
                "Checking.\n" + render_tool_calls(calls, [WEATHER], "qwen3_coder"),
                ToolCallConstraint(compile_tools([WEATHER, NOTE], "qwen3_coder", TOK, tool_choice="auto"))),
        Request(grammar(backend, ("json", json.dumps({"type": "object", "properties": {"a": {"type": "integer"}}}))),
                '{"a": 12}', None),
        Request(grammar(backend, tag_key("hermes", [WEATHER, NOTE], named)),
                render_tool_calls(note, [NOTE], "hermes"),
                ToolCallConstraint(compile_tools([WEATHER, NOTE], "hermes", TOK, tool_choice="add_note"))),
        Request(grammar(backend, tag_key("qwen3_coder", [WEATHER, NOTE], "required")),
                render_tool_calls(calls + note, [WEATHER, NOTE], "qwen3_coder"),
                ToolCallConstraint(compile_tools([WEATHER, NOTE], "qwen3_coder", TOK, tool_choice="required"))),
    ]
    assert [type(request.grammar) for request in requests] == [ToolCallGrammar, GuidanceGrammar, ToolCallGrammar, ToolCallGrammar]
    steps = 0
    while live := [request for request in requests if not request.done]:
        step(live)
        steps += 1
    assert steps == max(len(request.tokens) for request in requests)
    assert [request.grammar.is_terminated() for request in requests] == [True, True, True, True]


def test_a_cached_grammar_gives_each_request_a_fresh_copy(backend):
    key = tag_key("glm47", [WEATHER], "required")
    first = grammar(backend, key)
    first.accept_token(TOK.encode("<tool_call>")[0])
    second = grammar(backend, key)
    assert isinstance(second, ToolCallGrammar) and second is not first
    assert second.compiled is first.compiled
    assert second.constraint.allowed_words is not first.constraint.allowed_words
    mask = second.allocate_vocab_mask(TOK.vocab_size, 1, "cpu")
    second.fill_vocab_mask(mask, 0)
    assert allowed(mask[0].numpy())[TOK.encode("<tool_call>")[0]], "the copy starts where a request starts"


def test_a_rolled_back_grammar_masks_as_before(backend):
    text = render_tool_calls([{"name": "get_weather", "arguments": {"city": "Oslo"}}], [WEATHER], "qwen3_coder")
    tokens = TOK.encode(text)
    request = grammar(backend, tag_key("qwen3_coder", [WEATHER], "required"))
    mask = request.allocate_vocab_mask(TOK.vocab_size, 2, "cpu")
    for token in tokens[:4]:
        request.fill_vocab_mask(mask, 0)
        request.accept_token(token)
    request.fill_vocab_mask(mask, 0)
    for token in tokens[4:9]:
        request.accept_token(token)
    request.rollback(5)
    request.fill_vocab_mask(mask, 1)
    assert torch.equal(mask[0], mask[1])


def test_the_prompt_says_whether_reasoning_is_open(backend):
    opened = grammar(backend, tag_key("qwen3_coder", [WEATHER], "auto"), PROMPT + "<think>\n")
    closed = grammar(backend, tag_key("qwen3_coder", [WEATHER], "auto"), PROMPT + "<think>\n\n</think>\n\n")
    assert isinstance(opened, ToolCallGrammar) and isinstance(closed, ToolCallGrammar)
    assert opened.compiled.reasoning == "open" and closed.compiled.reasoning is True
    mask = opened.allocate_vocab_mask(TOK.vocab_size, 2, "cpu")
    opened.fill_vocab_mask(mask, 0)
    closed.fill_vocab_mask(mask, 1)
    think_end = TOK.token_id("</think>")
    assert allowed(mask[0].numpy())[think_end] and not allowed(mask[1].numpy())[think_end]


def test_one_bad_tool_is_left_out_and_the_others_constrained(backend):
    broken = {"type": "function", "function": {"name": "broken", "parameters": {"type": "strnig"}}}
    request = grammar(backend, tag_key("hermes", [broken, WEATHER], "auto"))
    assert isinstance(request, ToolCallGrammar)
    assert [tool.name for tool in request.compiled.left_out] == ["broken"]
    assert [tool.name for tool in request.compiled.tools] == ["get_weather"]


def test_tools_that_cannot_be_compiled_fail_the_request_with_the_reason(backend):
    key = tag_key("hermes", [WEATHER], "required")
    tag = json.loads(key[1])
    tag["request"]["tool_choice"] = "send_email"
    failed = grammar(backend, ("structural_tag", json.dumps(tag)))
    assert isinstance(failed, InvalidGrammarObject)
    assert "send_email" in failed.error_message


def test_other_grammars_go_to_the_other_backend(backend):
    assert isinstance(grammar(backend, ("regex", "[a-z]+")), GuidanceGrammar)
    other_tag = {"type": "structural_tag", "structures": [{"begin": "<tool_call>", "schema": {}, "end": "</tool_call>"}],
                 "triggers": ["<tool_call>"]}
    assert isinstance(grammar(backend, ("structural_tag", json.dumps(other_tag))), GuidanceGrammar)
    alone = ConstrainedGrammarBackend(TOK, None)
    assert isinstance(grammar(alone, ("json", "{}")), InvalidGrammarObject)
