"""The tool parser as vLLM's serving layer drives it, without a server:
composed by vLLM's ``ParserManager``, the request adjusted by vLLM's own
``Parser.adjust_request`` (which attaches XGrammar structural tags when
``VLLM_ENFORCE_STRICT_TOOL_CALLING`` is on), whole outputs through
``Parser.parse`` and streams through ``Parser.parse_delta``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
from vllm.parser.parser_manager import ParserManager

import constrained.vllm  # noqa: F401  (registers the tool parsers)
from constrained import load_tokenizer, render_tool_calls
from constrained.dialects import get_dialect
from constrained.runtime.engine import EXTRA_ARGS_KEY, ToolsRequest

WRITE = {
    "type": "function",
    "function": {
        "name": "write_file",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}, "mode": {"type": "integer"}},
            "required": ["path", "content"],
        },
    },
}
ARGUMENTS = {"path": "notes/a.md", "content": '{"looks": "like JSON"}\n  indented\n\n', "mode": 420}


@pytest.fixture(autouse=True)
def strict_tool_calling(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_ENFORCE_STRICT_TOOL_CALLING", "1")


def parser_for(dialect: str, request: ChatCompletionRequest) -> Any:
    composed = ParserManager.get_parser(tool_parser_name=f"constrained_{dialect}", enable_auto_tools=True)
    assert composed is not None
    return composed(load_tokenizer("qwen3"), request.tools)


def chat(tool_choice: Any = "required", *, strict: bool = False) -> ChatCompletionRequest:
    tool = json.loads(json.dumps(WRITE))
    if strict:
        tool["function"]["strict"] = True
    return ChatCompletionRequest(
        model="m", messages=[{"role": "user", "content": "write it"}], tools=[tool], tool_choice=tool_choice, stream=False
    )


@pytest.mark.parametrize(
    "tool_choice, strict",
    [("required", False), ("auto", True), ({"type": "function", "function": {"name": "write_file"}}, False)],
)
def test_a_constrained_request_carries_the_plugins_constraint_and_no_structural_tag(tool_choice, strict):
    request = parser_for("qwen3_coder", chat(tool_choice, strict=strict)).adjust_request(chat(tool_choice, strict=strict))
    outputs = request.structured_outputs
    assert outputs is None or (outputs.structural_tag is None and outputs.json is None)
    described = ToolsRequest.from_json(request.vllm_xargs[EXTRA_ARGS_KEY])
    assert described.dialect == "qwen3_coder" and [t["function"]["name"] for t in described.tools] == ["write_file"]
    assert request.skip_special_tokens is False


@pytest.mark.parametrize("dialect", ["qwen3_coder", "glm47", "hermes", "gemma4", "deepseek_v32", "deepseek_v41", "deepseek_v31", "deepseek_r1",
                                     "kimi_k2", "gpt_oss", "minimax_m2"])
def test_whole_and_streamed_outputs_give_the_exact_arguments(dialect):
    request = chat()
    framing = get_dialect(dialect).markup.messages  # the text in a preamble message where the family frames text
    lead = "Writing it.\n" if framing is None else framing.preamble("Writing it.\n")
    text = lead + render_tool_calls([{"name": "write_file", "arguments": ARGUMENTS}], [WRITE], dialect)
    _reasoning, content, calls = parser_for(dialect, request).parse(text, request, enable_auto_tools=True)
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("write_file", ARGUMENTS)]

    streaming = parser_for(dialect, request)
    pieces = [text[i : i + 5] for i in range(0, len(text), 5)]
    arguments, names, content = "", [], ""
    for number, piece in enumerate(pieces):
        delta = streaming.parse_delta(piece, [], request, prompt_token_ids=[1, 2, 3], finished=number == len(pieces) - 1)
        content += (delta.content if delta is not None else None) or ""
        for call in (delta.tool_calls if delta is not None else None) or ():
            if call.function is not None and call.function.name:
                names.append(call.function.name)
            if call.function is not None and call.function.arguments:
                arguments += call.function.arguments
    assert names == ["write_file"]
    assert json.loads(arguments) == ARGUMENTS
    assert content == "Writing it.\n"


GLM_THINKING_TEMPLATE = (
    "[gMASK]<sop>{% for m in messages %}<|{{ m.role }}|>\n{{ m.content }}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{{ '</think>' if enable_thinking is defined and not enable_thinking "
    "else '<think>' }}{% endif %}"
)
"""A thinking template in GLM-4.7's manner: the generation prompt opens the
reasoning block, or, with thinking off, closes it at once."""


@pytest.mark.parametrize("template_kwargs, reasoning", [({}, "open"), ({"enable_thinking": False}, False)])
def test_the_request_carries_what_its_chat_templates_prompt_says_about_reasoning(template_kwargs, reasoning):
    """Found by the plug-in from the template's generation prompt, with no
    flag: the logits processor then lets the output start inside the block."""
    request = chat("auto")
    request.chat_template = GLM_THINKING_TEMPLATE
    request.chat_template_kwargs = template_kwargs
    composed = ParserManager.get_parser(tool_parser_name="constrained_glm47", enable_auto_tools=True)
    assert composed is not None
    adjusted = composed(load_tokenizer("qwen3").hf, request.tools).adjust_request(request)
    assert ToolsRequest.from_json(adjusted.vllm_xargs[EXTRA_ARGS_KEY]).reasoning == reasoning


def test_content_after_vllms_reasoning_parser_is_read_as_it_stands():
    """With ``--reasoning-parser``, vLLM removes the reasoning before the tool
    parser reads the content: a request whose prompt opened the block reads
    that content as content, not as more reasoning."""
    request = chat("auto")
    request.chat_template = GLM_THINKING_TEMPLATE
    composed = ParserManager.get_parser(
        tool_parser_name="constrained_qwen3_coder", reasoning_parser_name="qwen3", enable_auto_tools=True
    )
    assert composed is not None
    parser = composed(load_tokenizer("qwen3").hf, request.tools)
    text = "Plan: write it.\n</think>\n\nWriting it.\n" + render_tool_calls(
        [{"name": "write_file", "arguments": ARGUMENTS}], [WRITE], "qwen3_coder"
    )
    reasoning, content, calls = parser.parse(text, request, enable_auto_tools=True)
    assert reasoning == "Plan: write it.\n" and (content or "").strip() == "Writing it."
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("write_file", ARGUMENTS)]


def test_a_gpt_oss_model_is_read_by_vllms_harmony_parser_under_the_plugins_constraint():
    """For a model whose type is gpt_oss, vLLM reads the output itself (its
    HarmonyParser, from the tokens) and takes only a tool parser of its
    GptOssToolParser class: the plug-in's gpt_oss parser is one, so the
    request gets the plug-in's constraint, no structural tag of vLLM's,
    and vLLM reads the call the constraint let through."""
    composed = ParserManager.get_parser(tool_parser_name="constrained_gpt_oss", enable_auto_tools=True, is_harmony=True)
    assert composed is not None and composed.__name__ == "HarmonyParser"
    request = chat("required")
    parser = composed(load_tokenizer("qwen3"), request.tools)
    adjusted = parser.adjust_request(request)
    outputs = adjusted.structured_outputs
    assert outputs is None or (outputs.structural_tag is None and outputs.json is None)
    described = ToolsRequest.from_json(adjusted.vllm_xargs[EXTRA_ARGS_KEY])
    assert (described.dialect, described.tool_choice) == ("gpt_oss", "required")

    harmony = load_tokenizer("o200k_harmony")
    compiled = described.compile(harmony)
    text = "<|channel|>analysis<|message|>Write it.<|end|><|start|>assistant" + render_tool_calls(
        [{"name": "write_file", "arguments": ARGUMENTS}], [WRITE], "gpt_oss"
    )
    assert compiled.check(text).accepted
    tokens = harmony.encode(text) + [harmony.token_id("<|call|>")]
    _reasoning, content, calls = parser.parse(text, request, enable_auto_tools=True, model_output_token_ids=tokens)
    assert [(c.name, json.loads(c.arguments)) for c in calls or ()] == [("write_file", ARGUMENTS)]
    assert not content
