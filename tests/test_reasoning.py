"""Reasoning through the pipeline: a block the model opens, one the prompt
opened (``reasoning="open"``: a thinking model's template ends the prompt
with ``<think>``), a turn that stops inside its block, a call written
before the block is closed, GLM's interleaved thinking and Gemma 4's stray
channel markers. The constraint, the parser and the stream parser agree;
``generate``, the transformers hook and the server side find the open block
in the prompt themselves."""

from __future__ import annotations

import functools
import json
import random
from typing import Any

import pytest
import torch
from corpus import CORPUS
from stand_in_model import StandInModel

from constrained import (
    CompileOptions,
    ToolCallLogitsProcessor,
    ToolCallStreamParser,
    compile_tools,
    load_tokenizer,
    parse_tool_calls,
    render_tool_calls,
)
from constrained.cli import main
from constrained.dialects import get_dialect
from constrained.errors import ArgumentError, OptionError
from constrained.runtime.engine import ToolsRequest, template_reasoning
from constrained.runtime.generate import build_prompt, generate

LIST_FILES = {
    "type": "function",
    "function": {
        "name": "list_files",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "depth": {"type": "integer"}},
            "required": ["path"],
        },
    },
}
ARGUMENTS = {"path": "src/", "depth": 2}
THINKING = ("qwen3_coder", "hermes", "glm45", "glm47", "gemma4")
"""The dialects with a reasoning block."""


def call_text(dialect: str) -> str:
    return render_tool_calls([{"name": "list_files", "arguments": ARGUMENTS}], [LIST_FILES], dialect)


def closing(dialect: str) -> str:
    block = get_dialect(dialect).reasoning_block()
    assert block is not None
    return block.closing


def streamed(text: str, dialect: str, reasoning: Any, size: int) -> tuple[str, ToolCallStreamParser]:
    parser = ToolCallStreamParser([LIST_FILES], dialect, reasoning=reasoning)
    deltas = [d for i in range(0, len(text), size) for d in parser.feed(text[i : i + size])] + parser.close()
    return "".join(d.get("content", "") for d in deltas), parser


def read_both(text: str, dialect: str, reasoning: Any = True) -> Any:
    """The parse of ``text``, checked to be what the stream gives in pieces
    of 1, 3 and 7 characters."""
    parsed = parse_tool_calls(text, [LIST_FILES], dialect, reasoning=reasoning)
    for size in (1, 3, 7):
        content, parser = streamed(text, dialect, reasoning, size)
        assert parser.result == parsed and content == parsed.content, (dialect, size)
    return parsed


def arguments(parsed: Any) -> list[dict[str, Any]]:
    return [json.loads(call["function"]["arguments"]) for call in parsed.tool_calls]


# -- the option ------------------------------------------------------------------------


def test_reasoning_is_true_false_or_open_and_anything_else_is_refused_by_name():
    assert CompileOptions(reasoning="open").reasoning == "open"
    for bad in ("on", 1, None, "closed"):
        with pytest.raises(OptionError, match="reasoning must be True, False or \"open\"") as caught:
            CompileOptions(reasoning=bad)  # type: ignore[arg-type]
        assert caught.value.argument == "reasoning"
    with pytest.raises(OptionError, match="reasoning"):
        parse_tool_calls("x", [LIST_FILES], "hermes", reasoning="opened")  # type: ignore[arg-type]


def test_a_dialect_without_a_reasoning_block_refuses_an_open_one():
    with pytest.raises(OptionError, match="functiongemma.*no reasoning block"):
        compile_tools([LIST_FILES], "functiongemma", get_dialect("functiongemma").default_tokenizer, reasoning="open")
    with pytest.raises(OptionError, match="functiongemma"):
        parse_tool_calls("x", [LIST_FILES], "functiongemma", reasoning="open")


def test_the_command_line_spells_it_on_off_open(tmp_path, capsys):
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([LIST_FILES]))
    text = "Look first.\n</think>\n\n" + call_text("qwen3_coder")
    assert main(["parse", str(tools), text, "--dialect", "qwen3_coder", "--reasoning", "open"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["reasoning"] == "Look first.\n" and out["content"] == "" and len(out["tool_calls"]) == 1
    assert main(["check", str(tools), text, "--dialect", "qwen3_coder", "--reasoning", "open"]) == 0
    assert main(["check", str(tools), text, "--dialect", "qwen3_coder"]) == 1  # the grammar expects <think> first
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["parse", str(tools), text, "--dialect", "qwen3_coder", "--reasoning", "maybe"])
    assert "expected one of on, off, open" in capsys.readouterr().err


# -- the constraint --------------------------------------------------------------------


@pytest.mark.parametrize("dialect", THINKING)
@pytest.mark.parametrize("tool_choice", ["auto", "required", "list_files"])
def test_inside_an_open_block_only_its_closing_leads_out(dialect, tool_choice):
    compiled = compile_tools([LIST_FILES], dialect, get_dialect(dialect).default_tokenizer,
                             tool_choice=tool_choice, reasoning="open")
    thought = "The user wants the files.\nList src/ two levels deep."
    blank = "\n\n" if dialect != "gemma4" else ""
    assert compiled.check(thought + closing(dialect) + blank + call_text(dialect)).accepted
    assert compiled.check(closing(dialect) + blank + call_text(dialect)).accepted  # an empty block
    # A call written inside the block is refused at its opening: the block closes first.
    inside = compiled.check(thought + "\n" + call_text(dialect))
    assert not inside.accepted and inside.byte_offset == len((thought + "\n").encode())
    # The model does not open a second block, nor end its turn inside this one.
    opening = get_dialect(dialect).reasoning_block().opening  # type: ignore[union-attr]
    assert not compiled.check(opening + thought + closing(dialect) + call_text(dialect)).accepted
    assert not compiled.check(thought).accepted
    if tool_choice == "auto":
        assert compiled.check(thought + closing(dialect) + blank + "No call needed.").accepted


def test_none_and_no_tools_still_close_the_block_first():
    for compiled in (
        compile_tools([LIST_FILES], "qwen3_coder", "qwen3", tool_choice="none", reasoning="open"),
        compile_tools([], "qwen3_coder", "qwen3", reasoning="open"),
    ):
        assert compiled.check("hmm</think>\n\nHello.").accepted
        assert not compiled.check("Hello.").accepted


# -- the parser and the stream ---------------------------------------------------------


@pytest.mark.parametrize("dialect", THINKING)
def test_output_that_starts_inside_the_block_reads_as_reasoning_then_calls(dialect):
    text = "The user wants the files.\n" + closing(dialect) + "\n\n" + call_text(dialect)
    parsed = read_both(text, dialect, "open")
    assert parsed.reasoning == "The user wants the files.\n"
    assert parsed.content == "" and parsed.errors == [] and arguments(parsed) == [ARGUMENTS]
    # The same text read as if the model opened its own block: the reasoning is content, nothing is lost
    # (Gemma 4's lone closing marker leaves the content: see the channel-marker cases).
    plain = read_both(text, dialect)
    marker = "" if dialect == "gemma4" else closing(dialect) + "\n\n"
    assert plain.content == "The user wants the files.\n" + marker and arguments(plain) == [ARGUMENTS]


@pytest.mark.parametrize("dialect", THINKING)
def test_a_call_ends_a_block_left_open(dialect):
    block = get_dialect(dialect).reasoning_block()
    assert block is not None
    opened_by_model = read_both(block.opening + block.label + "I should list the files.\n" + call_text(dialect), dialect)
    assert opened_by_model.reasoning == "I should list the files.\n" and opened_by_model.content == ""
    assert arguments(opened_by_model) == [ARGUMENTS]
    opened_by_prompt = read_both("I should list the files.\n" + call_text(dialect), dialect, "open")
    assert opened_by_prompt.reasoning == "I should list the files.\n" and arguments(opened_by_prompt) == [ARGUMENTS]


@pytest.mark.parametrize("dialect", THINKING)
def test_a_turn_that_stops_inside_the_block_is_reasoning_not_content(dialect):
    block = get_dialect(dialect).reasoning_block()
    assert block is not None
    parsed = read_both(block.opening + block.label + "Still weighing it", dialect)
    assert parsed.reasoning == "Still weighing it" and parsed.content == "" and parsed.tool_calls == []
    parsed = read_both("Still weighing it", dialect, "open")
    assert parsed.reasoning == "Still weighing it" and parsed.content == ""


def test_the_blank_after_a_closing_is_the_templates_and_a_closing_marker_in_the_reasoning_ends_it():
    parsed = read_both("<think>\nplan\n</think>\n\n  Done.</think>", "qwen3_coder")
    assert parsed.reasoning == "\nplan\n" and parsed.content == "Done.</think>"  # a second closing is text


def test_glm_reads_interleaved_thinking_as_reasoning():
    for dialect in ("glm45", "glm47"):
        text = "<think>First look.</think>Let me check.<think>The path is src/.</think>\n" + call_text(dialect)
        parsed = read_both(text, dialect)
        assert parsed.reasoning == "First look.The path is src/." and parsed.content == "Let me check."
        assert arguments(parsed) == [ARGUMENTS]
        # A block without its closing after some text is text: nothing says where it would end.
        unclosed = read_both("Let me check.<think>hmm " + call_text(dialect), dialect)
        assert unclosed.content == "Let me check.<think>hmm " and arguments(unclosed) == [ARGUMENTS]
    # qwen3_coder's template writes one leading block: a later one is content.
    later = read_both("Let me check.<think>x</think>" + call_text("qwen3_coder"), "qwen3_coder")
    assert later.reasoning is None and later.content == "Let me check.<think>x</think>"


@pytest.mark.parametrize(
    "text, reasoning, content",
    [
        ("<|channel>thought\n<channel|>Hello.", "", "Hello."),  # an empty thought block
        ("<|channel>thought<channel|>Hello.", "", "Hello."),  # its line break missing
        ("<|channel><channel|>Hello.", "", "Hello."),  # its label missing too
        ("<channel|>Hello.", "", "Hello."),  # a lone closing: thinking off
        ("Hello.<channel|> Bye.", "", "Hello.Bye."),  # a stray closing in the text
        ("Hi.<|channel>thought\nthe tool fits<channel|>", "the tool fits", "Hi."),  # a later block
        ("```\n<channel|>\n```", None, "```\n<channel|>\n```"),  # inside a code fence: text
    ],
)
def test_gemma4_channel_markers_left_in_the_output_are_not_content(text, reasoning, content):
    parsed = read_both(text, "gemma4")
    assert (parsed.reasoning, parsed.content) == (reasoning, content)


def test_a_compiled_set_tells_the_parser_its_reasoning():
    compiled = compile_tools([LIST_FILES], "hermes", "qwen3", reasoning="open")
    text = "ok</think>\n" + call_text("hermes")
    assert parse_tool_calls(text, compiled, "hermes").reasoning == "ok"
    assert parse_tool_calls(text, compiled, "hermes", reasoning=True).reasoning is None


# -- the prompt says -------------------------------------------------------------------


@pytest.mark.parametrize(
    "dialect, prompt, state",
    [
        ("qwen3_coder", "<|im_start|>assistant\n<think>\n", "open"),
        ("qwen3_coder", "<|im_start|>assistant\n<think>\n\n</think>\n\n", False),
        ("qwen3_coder", "<|im_start|>assistant\n", None),
        ("glm47", "<|assistant|><think>", "open"),
        ("gemma4", "<|turn>model\n<|channel>thought\n", "open"),
        ("gemma4", "<|turn>model\n<|channel>", "open"),
        ("gemma4", "<|turn>model\n", None),
        ("functiongemma", "<start_of_turn>model\n", None),
    ],
)
def test_a_prompts_tail_says_whether_the_block_is_open(dialect, prompt, state):
    assert get_dialect(dialect).prompt_reasoning(prompt) == state


def test_after_prompt_recompiles_once_for_an_open_block_and_keeps_what_was_left_out():
    broken = {"type": "function", "function": {"name": "broken", "parameters": {"type": "object", "properties": {"x": {"type": "nonsense"}}}}}
    compiled = compile_tools([LIST_FILES, broken], "qwen3_coder", "qwen3")
    assert [t.name for t in compiled.left_out] == ["broken"]
    opened = compiled.after_prompt("<|im_start|>assistant\n<think>\n")
    assert opened.reasoning == "open" and opened is compiled.after_prompt("...<think>\n")
    assert [t.name for t in opened.left_out] == ["broken"] and opened.warnings == compiled.warnings
    assert compiled.after_prompt("<|im_start|>assistant\n") is compiled
    assert opened.after_prompt("<|im_start|>assistant\n<think>\n\n</think>\n\n").reasoning is True
    assert opened.after_prompt("<|im_start|>assistant\n") is opened


def test_the_dialects_own_prompt_opens_the_block_where_the_familys_template_does():
    tools = compile_tools([LIST_FILES], "qwen3_coder", "qwen3").tools
    chosen = get_dialect("qwen3_coder")
    assert chosen.chat_prompt([{"role": "user", "content": "hi"}], tools).endswith("<|im_start|>assistant\n<think>\n")
    assert chosen.chat_prompt([{"role": "user", "content": "hi"}], tools, False).endswith("<|im_start|>assistant\n")
    gemma = get_dialect("gemma4")
    assert gemma.chat_prompt([{"role": "user", "content": "hi"}], tools).endswith("<|turn>model\n")
    assert gemma.chat_prompt([{"role": "user", "content": "hi"}], tools, "open").endswith("<|turn>model\n<|channel>thought\n")


THINKING_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n{% else %}<think>\n{% endif %}"
    "{% endif %}"
)
"""A hybrid thinking template as Qwen3.5 writes it: the prompt opens the
block, or, with thinking off, holds an empty one."""


def test_a_chat_templates_generation_prompt_says_it_for_a_server():
    hf = load_tokenizer("qwen3").hf
    coder = get_dialect("qwen3_coder")
    assert template_reasoning(hf, coder, THINKING_TEMPLATE, {}) == "open"
    assert template_reasoning(hf, coder, THINKING_TEMPLATE, {"enable_thinking": False}) is False
    assert template_reasoning(hf, coder, "{% for m in messages %}{{ m.content }}{% endfor %}", {}) is None
    assert template_reasoning(hf, coder, "{{ raise_exception('no') }}", {}) is None
    assert template_reasoning(object(), coder, None, {}) is None  # no chat template at all


def test_a_server_request_carries_open_and_refuses_anything_else():
    described = ToolsRequest("qwen3_coder", [LIST_FILES], reasoning="open")
    assert ToolsRequest.from_json(described.to_json()).reasoning == "open"
    assert described.compile("qwen3").reasoning == "open"
    with pytest.raises(ArgumentError, match="reasoning"):
        ToolsRequest.from_json('{"dialect": "qwen3_coder", "reasoning": "sometimes"}')


# -- generation ------------------------------------------------------------------------


@functools.cache
def gemma() -> Any:
    return load_tokenizer("gemma4")


NOTE = {"name": "note", "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}
SCRIPT = 'I should note it.<|tool_call>call:note{text:<|"|>hi<|"|>}<tool_call|><|tool_response>'


class ThinkingModel(StandInModel):
    """A stand-in for a thinking model that calls from inside its
    reasoning: it prefers the next token of :data:`SCRIPT` (which has no
    closing marker) and, second, the closing ``<channel|>``."""

    def __init__(self, prompt_length: int) -> None:
        super().__init__(gemma().vocab_size)
        self.script = gemma().encode(SCRIPT)
        self.closing = gemma().token_id("<channel|>")
        self.prompt_length = prompt_length

    def preferences(self, ids: list[int]) -> dict[int, float]:
        written = [t for t in ids[self.prompt_length :] if t != self.closing]
        return {self.script[min(len(written), len(self.script) - 1)]: 10.0, self.closing: 5.0}


def test_a_model_calling_from_inside_its_reasoning_closes_the_block_first_under_the_constraint():
    compiled = compile_tools([NOTE], "gemma4", gemma(), tool_choice="required", reasoning="open")
    prompt = build_prompt("note hi", compiled)
    assert prompt.endswith("<|turn>model\n<|channel>thought\n")
    model = ThinkingModel(len(gemma().encode(prompt)))
    constrained_run = generate(model, gemma(), "note hi", compiled, max_new_tokens=40)
    assert not isinstance(constrained_run, list)
    assert constrained_run.text == 'I should note it.<channel|><|tool_call>call:note{text:<|"|>hi<|"|>}<tool_call|>'
    assert constrained_run.reasoning == "I should note it." and constrained_run.content == ""
    assert [c["function"]["arguments"] for c in constrained_run.tool_calls] == ['{"text": "hi"}']
    assert constrained_run.finished and constrained_run.events == []
    # Without the constraint the model never closes its block; the parser still reads the call after it.
    free_run = generate(model, gemma(), "note hi", compiled, max_new_tokens=40, constrain=False)
    assert not isinstance(free_run, list)
    assert "<channel|>" not in free_run.text and free_run.reasoning == "I should note it."
    assert [c["function"]["arguments"] for c in free_run.tool_calls] == ['{"text": "hi"}']


class _TemplateTokenizer:
    """A chat tokenizer whose generation prompt opens Gemma 4's thought block."""

    chat_template = (
        "{% for m in messages %}<|turn>{{ m.role }}\n{{ m.content }}<turn|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|turn>model\n<|channel>thought\n{% endif %}"
    )

    def apply_chat_template(self, messages: Any, **kwargs: Any) -> str:
        return gemma().hf.apply_chat_template(messages, chat_template=self.chat_template, **kwargs)


def test_generate_finds_the_open_block_in_a_chat_templates_prompt():
    compiled = compile_tools([NOTE], "gemma4", gemma(), tool_choice="required")  # the model may open a block
    prompt = build_prompt("note hi", compiled, _TemplateTokenizer())
    model = ThinkingModel(len(gemma().encode(prompt)))
    run = generate(model, gemma(), "note hi", compiled, max_new_tokens=40, chat_tokenizer=_TemplateTokenizer())
    assert not isinstance(run, list)
    assert run.reasoning == "I should note it." and run.events == [] and len(run.tool_calls) == 1


def test_the_transformers_hook_finds_the_open_block_in_the_prompt():
    compiled = compile_tools([LIST_FILES], "qwen3_coder", "qwen3", tool_choice="required")
    tok = compiled.tokenizer
    processor = ToolCallLogitsProcessor(compiled)
    rows = 2
    prompt = tok.encode("<|im_start|>user\nlist<|im_end|>\n<|im_start|>assistant\n<think>\n")
    scores = torch.zeros(rows, tok.vocab_size)
    processor(torch.tensor([prompt] * rows), scores)
    assert processor.constraint is not None and processor.constraint.compiled.reasoning == "open"
    think = tok.token_id("<think>")
    assert scores[0, think] == float("-inf")  # no second opening inside the block
    assert scores[0, tok.token_id("</think>")] == 0 and scores[0, tok.encode("I")[0]] == 0
    mixed = [tok.encode("<|im_start|>assistant\n"), prompt[-len(tok.encode("<|im_start|>assistant\n")) :]]
    width = max(map(len, mixed))
    with pytest.raises(Exception, match="disagree on reasoning"):
        processor.reset()
        processor(torch.tensor([[0] * (width - len(m)) + m for m in mixed]), torch.zeros(2, tok.vocab_size))


def test_a_random_thought_streams_as_the_parse_reads_it():
    rng = random.Random(5)
    words = ["plan", "<", "think", "/", ">", "\n", " ", "list", "<tool", "call>"]
    for _ in range(200):
        thought = "".join(rng.choice(words) for _ in range(rng.randint(0, 12)))
        text = thought + "</think>\n\n" + call_text("qwen3_coder")
        parsed = read_both(text, "qwen3_coder", "open")
        assert parsed.reasoning is not None


@pytest.mark.parametrize("dialect", THINKING)
def test_random_walks_from_inside_an_open_block_finish_valid(dialect):
    """Seeded walks of the fuzzer (every 2nd mask compared with a plain
    llguidance matcher's) through a block the prompt opened: none wedges or
    fails, every finished output parses with its calls valid."""
    from constrained.qa.fuzz import FuzzSummary, WalkOptions, fuzz

    tools = json.loads((CORPUS / "mcp" / "time.tools.json").read_text())["tools"]
    summary = FuzzSummary(keep=3)
    for choice in ("required", "auto"):
        compiled = compile_tools(tools, dialect, get_dialect(dialect).default_tokenizer, tool_choice=choice,
                                 reasoning="open")
        summary.merge(fuzz(compiled, 4, 11, WalkOptions(budget=200, crosscheck_every=2)))
    counts = summary.counts()
    assert counts["wedges"] == counts["errors"] == counts["invalid"] == 0, summary.failures
    assert counts["finished"] >= 4
