"""A serving engine's batch (``constrained.runtime.engine``), without an
engine: requests join, leave and move between rows, each row is masked
exactly as a constraint of its own tool set would mask it, and rows of
requests without tools are never touched."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
from sample_tools import WEATHER

from constrained import load_tokenizer, render_tool_calls
from constrained.errors import ArgumentError, SchemaError, ToolDefinitionError
from constrained.runtime.constraint import ToolCallConstraint
from constrained.runtime.engine import EXTRA_ARGS_KEY, EngineRows, ToolsRequest

CALC = {
    "type": "function",
    "function": {
        "name": "add",
        "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]},
    },
}


@functools.cache
def tok():
    return load_tokenizer("qwen3")


def request(*tools: dict, **options) -> ToolsRequest:
    return ToolsRequest("qwen3_coder", list(tools), **options)


def output_tokens(call: dict, tool: dict) -> list[int]:
    return tok().encode(render_tool_calls([call], [tool], "qwen3_coder"))


def allowed(logits: torch.Tensor, row: int) -> np.ndarray:
    return torch.isfinite(logits[row]).numpy()


def reference_allowed(compiled, tokens: list[int], width: int) -> np.ndarray:
    constraint = ToolCallConstraint(compiled, 1)
    constraint.consume_row(0, tokens)
    logits = torch.zeros(1, width)
    constraint.mask_logits(logits)
    return allowed(logits, 0)


def test_a_description_travels_as_json_and_back():
    described = request(WEATHER, tool_choice="get_weather", parallel_tool_calls=False)
    assert ToolsRequest.from_json(described.to_json()) == described


def test_an_engine_s_compile_leaves_the_first_masks_in_the_cache():
    """The forced run from the start, the choice of tool and each tool's
    name with the markup it forces are masked where the engine compiles
    (its compile thread), not in its decoding step."""
    tools = [{"type": "function", "function": {"name": name, "parameters": CALC["function"]["parameters"]}}
             for name in ("subtract_warmed", "multiply_warmed")]
    compiled = request(*tools, tool_choice="required", reasoning=False).compile(tok())
    for tool in tools:
        call = {"name": tool["function"]["name"], "arguments": {"a": 1, "b": 2}}
        tokens = output_tokens(call, tool)
        head = len(tok().encode(f"<tool_call>\n<function={call['name']}>\n"))
        assert tokens[:head] == tok().encode(f"<tool_call>\n<function={call['name']}>\n")
        constraint = ToolCallConstraint(compiled, 1)
        misses = compiled._masks.misses
        for token in tokens[:head]:
            constraint.mask_logits(torch.zeros(1, tok().vocab_size))
            constraint.consume_row(0, [token])
        assert compiled._masks.misses == misses and constraint.cached_rows == head


@pytest.mark.parametrize(
    "text, complaint",
    [("{", "not JSON"), ('{"tools": []}', "'dialect' string"), (42, "'dialect' string"),
     ('{"dialect": "hermes", "tool": []}', "unknown fields ['tool']"), ('{"dialect": "hermes", "tools": {}}', "'tools' must be a list")],
)
def test_a_malformed_description_says_what_is_wrong(text, complaint):
    with pytest.raises(ArgumentError, match=EXTRA_ARGS_KEY) as caught:
        ToolsRequest.from_json(text)
    assert complaint in str(caught.value)


def test_check_names_a_malformed_tool_and_leaves_an_unconstrainable_one_to_the_compiler():
    bad = {"type": "function", "function": {"name": "broken", "parameters": {"type": "object", "properties": "oops"}}}
    with pytest.raises(SchemaError, match="broken"):
        request(WEATHER, bad).check()
    with pytest.raises(ToolDefinitionError, match="defined twice"):
        request(WEATHER, WEATHER).check()
    never = {"type": "function", "function": {"name": "never", "parameters": {
        "type": "object", "properties": {"x": {"type": "integer", "enum": ["1"]}}, "required": ["x"]}}}
    request(WEATHER, never).check()
    compiled = request(WEATHER, never).compile(tok())
    assert [t.name for t in compiled.tools] == ["get_weather"]
    assert [t.name for t in compiled.left_out] == ["never"]


def two_requests():
    """Rows 0 (weather) and 2 (calc) of a batch, their compiled tools, the
    tokens each will sample and their (empty) output lists."""
    compiled = {name: request(tool, tool_choice="required").compile(tok()) for name, tool in (("w", WEATHER), ("c", CALC))}
    tokens = {"w": output_tokens({"name": "get_weather", "arguments": {"city": "Paris"}}, WEATHER),
              "c": output_tokens({"name": "add", "arguments": {"a": 1, "b": 2}}, CALC)}
    outputs = {"w": [], "c": []}
    rows = EngineRows()
    rows.add(0, compiled["w"], outputs["w"])
    rows.add(2, compiled["c"], outputs["c"])
    return rows, compiled, tokens, outputs


def test_rows_follow_their_requests_and_others_stay_untouched():
    width = tok().vocab_size + 64  # padded embedding rows, as models have
    rows, compiled, tokens, outputs = two_requests()
    where = {"w": 0, "c": 2}
    generator = torch.Generator().manual_seed(0)
    for step in range(12):
        if step == 5:  # the engine condenses its batch: c moves to row 1
            rows.move(2, 1, swap=False)
            where["c"] = 1
        if step == 8:  # and swaps the two
            rows.move(0, 1, swap=True)
            where = {"w": 1, "c": 0}
        logits = torch.randn(3, width, generator=generator)
        before = logits.clone()
        rows.apply(logits)
        for name, row in where.items():
            expected = reference_allowed(compiled[name], outputs[name], width)
            assert (allowed(logits, row) == expected).all(), (name, step)
            kept = allowed(logits, row)
            assert torch.equal(logits[row][kept], before[row][kept])
        free = ({0, 1, 2} - set(where.values())).pop()
        assert torch.equal(logits[free], before[free])
        for name in outputs:
            outputs[name].append(tokens[name][step])
    rows.remove(where["w"])
    assert where["w"] not in rows and len(rows) == 1


def test_a_resumed_request_is_caught_up_and_a_placeholder_waits():
    compiled = request(CALC, tool_choice="required").compile(tok())
    tokens = output_tokens({"name": "add", "arguments": {"a": 1, "b": 2}}, CALC)
    width = tok().vocab_size
    outputs = list(tokens[:6])  # sampled before a preemption
    rows = EngineRows()
    rows.add(0, compiled, outputs)
    logits = torch.zeros(1, width)
    rows.apply(logits)
    assert (allowed(logits, 0) == reference_allowed(compiled, tokens[:6], width)).all()
    outputs.append(-1)  # asynchronous scheduling: the id is not known yet
    logits.zero_()
    rows.apply(logits)
    assert (allowed(logits, 0) == reference_allowed(compiled, tokens[:6], width)).all()
    outputs[-1] = tokens[6]
    logits.zero_()
    rows.apply(logits)
    assert (allowed(logits, 0) == reference_allowed(compiled, tokens[:7], width)).all()


def test_a_finished_row_allows_only_its_end_tokens():
    compiled = request(CALC, tool_choice="required", parallel_tool_calls=False).compile(tok())
    outputs = output_tokens({"name": "add", "arguments": {"a": 1, "b": 2}}, CALC)
    rows = EngineRows()
    rows.add(0, compiled, outputs)
    logits = torch.zeros(1, tok().vocab_size)
    rows.apply(logits)
    assert 0 < len(np.flatnonzero(allowed(logits, 0)))
    assert set(np.flatnonzero(allowed(logits, 0))) <= set(tok().eos_token_ids)


def test_compile_is_cached_by_content():
    first = request(WEATHER, CALC).compile(tok())
    again = ToolsRequest.from_json(request(WEATHER, CALC).to_json()).compile(tok())
    assert again is first


def test_a_step_allocates_nothing_once_the_requests_have_joined():
    """After a request's first step, masking the batch and catching rows up
    on new tokens records no memory allocation in torch's profiler."""
    from torch.profiler import ProfilerActivity, profile

    rows, _, tokens, outputs = two_requests()
    logits = torch.randn(3, tok().vocab_size)
    rows.apply(logits)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        for step in range(6):
            for name in outputs:
                outputs[name].append(tokens[name][step])
            rows.apply(logits)
    assert {e.name for e in prof.events()} & {"aten::index_select", "aten::minimum", "aten::index_fill_"}
    assert [e for e in prof.events() if e.cpu_memory_usage != 0] == []


def test_a_compile_still_running_is_waited_for_by_the_first_step_that_masks_its_row():
    """A request joins with its tools still compiling on the compile thread;
    the batch goes on, and the first step that masks its row waits for the
    compile and masks the row exactly."""
    import threading
    from concurrent.futures import Future

    compiled = request(CALC, tool_choice="required").compile(tok())
    pending: Future = Future()
    rows = EngineRows()
    rows.add(0, pending, [])
    threading.Timer(0.05, pending.set_result, (compiled,)).start()
    logits = torch.zeros(1, tok().vocab_size)
    rows.apply(logits)
    assert (allowed(logits, 0) == reference_allowed(compiled, [], tok().vocab_size)).all()


def test_a_request_whose_tools_do_not_compile_is_served_unconstrained(caplog):
    never = {"type": "function", "function": {"name": "never", "parameters": {
        "type": "object", "properties": {"x": {"type": "integer", "enum": ["1"]}}, "required": ["x"]}}}
    future = request(never, tool_choice="required").compile_in_background(tok())
    assert future.result() is None
    assert "cannot be compiled" in caplog.text
    rows = EngineRows()
    rows.add(1, future, [])
    logits = torch.randn(2, tok().vocab_size)
    before = logits.clone()
    rows.apply(logits)
    assert torch.equal(logits, before) and 1 not in rows


def test_the_compile_thread_gives_the_cached_compile():
    first = request(WEATHER, CALC).compile(tok())
    assert request(WEATHER, CALC).compile_in_background(tok()).result() is first
