"""``constrained export-model``: the default model as a Hugging Face folder
that another engine loads offline and prompts exactly as the library does:
same token ids, same logits, the constraint's end tokens as end tokens, and
a chat template that renders what ``Dialect.chat_prompt`` renders."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jinja2
import pytest
import torch
from corpus import CORPUS, mcp_calls
from transformers import AutoModelForCausalLM, AutoTokenizer

from constrained import load_model, load_tokenizer
from constrained.cli import main
from constrained.dialects import get_dialect
from constrained.frames.toolset import normalize_tools
from constrained.runtime.export import export_model

TEXTS = [
    "plain text, with spaces  and   runs",
    '<|tool_call>call:f{a:<|"|>x "quoted" {braces}<|"|>,b:[1,2.5,true,null]}<tool_call|><|tool_response>',
    "<|turn>user\nline one\n\n  indented\tline<turn|>\n<|turn>model\n",
    "<|tool>declaration:g{}<tool|> unicode: é ü 東京 🙂",
]


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return export_model(tmp_path_factory.mktemp("export") / "model")


@pytest.fixture(scope="module")
def hf_tokenizer(exported: Path) -> Any:
    return AutoTokenizer.from_pretrained(exported)


def openai_tools(server: str) -> list[dict[str, Any]]:
    listing = json.loads((CORPUS / "mcp" / f"{server}.tools.json").read_text())
    return [{"type": "function", "function": {"name": t["name"], "description": t.get("description", ""),
                                              "parameters": t["inputSchema"]}} for t in listing["tools"]]


@pytest.mark.slow
def test_the_tokenizer_gives_the_library_s_ids(hf_tokenizer: Any) -> None:
    ours = load_tokenizer("gemma4")
    for text in TEXTS:
        ids = hf_tokenizer(text, add_special_tokens=False)["input_ids"]
        assert ids == ours.encode(text), text
        assert hf_tokenizer.decode(ids) == text
    assert hf_tokenizer("hi")["input_ids"][0] == hf_tokenizer.convert_tokens_to_ids("<bos>")


def test_the_weights_give_the_default_model_s_logits(exported: Path) -> None:
    ids = torch.tensor([load_tokenizer("gemma4").encode('<bos><|turn>user\nWhat time is it?<turn|>\n<|turn>model\n')])
    theirs = AutoModelForCausalLM.from_pretrained(exported, dtype=torch.float32).eval()
    with torch.no_grad():
        assert torch.equal(theirs(ids).logits, load_model().model(ids).logits)


def test_the_generation_config_ends_where_the_constraint_ends_a_turn(exported: Path) -> None:
    config = json.loads((exported / "generation_config.json").read_text())
    assert config["eos_token_id"] == list(load_tokenizer("gemma4").eos_token_ids)
    assert load_tokenizer(str(exported)).eos_token_ids == load_tokenizer("gemma4").eos_token_ids


@pytest.mark.parametrize("server", sorted(p.name.removesuffix(".tools.json") for p in (CORPUS / "mcp").glob("*.tools.json")))
def test_the_template_declares_tools_as_the_dialect_does(hf_tokenizer: Any, server: str) -> None:
    tools = openai_tools(server)
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What can you do?"}]
    rendered = hf_tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
    assert rendered == get_dialect("gemma4").chat_prompt(messages, list(normalize_tools(tools)))
    assert rendered.count("<|tool>declaration:") == len(tools)


def test_the_template_writes_earlier_calls_and_results_as_the_dialect_does(hf_tokenizer: Any) -> None:
    calls = mcp_calls()
    assert len(calls) > 30
    for call in calls:
        tools = openai_tools(call.server.removesuffix(".tools"))
        messages = [
            {"role": "user", "content": "Go."},
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": call.name, "arguments": call.arguments}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "done: {\"ok\": true}"},
        ]
        rendered = hf_tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
        dialect = get_dialect("gemma4")
        normalized = list(normalize_tools(tools))
        assert rendered == dialect.chat_prompt(messages, normalized), call.name
        tool = next(t for t in normalized if t.name == call.name)
        assert dialect.render_call(tool, call.arguments, "alphabetical") in rendered
        assert rendered.endswith('<|turn>tool\ndone: {"ok": true}<turn|>\n<|turn>model\n')


def test_arguments_as_json_text_are_refused_by_the_template(hf_tokenizer: Any) -> None:
    messages = [{"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{}"}}]}]
    with pytest.raises(jinja2.TemplateError, match="must be an object"):
        hf_tokenizer.apply_chat_template(messages, tokenize=False)


@pytest.mark.slow
def test_the_command_writes_a_folder_and_refuses_a_non_empty_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "out"
    assert main(["export-model", str(target)]) == 0
    assert capsys.readouterr().out.strip() == str(target)
    names = sorted(p.name for p in target.iterdir())
    assert {"config.json", "model.safetensors", "tokenizer.json", "generation_config.json"} <= set(names)
    assert main(["export-model", str(target)]) == 2
    assert "exists and is not empty" in capsys.readouterr().err
    assert main(["export-model", str(target), "--force"]) == 0
    assert sorted(p.name for p in target.iterdir()) == names
    assert main(["export-model", str(target / "config.json")]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err
    assert load_tokenizer("gemma4").hf.chat_template is None  # the shared tokenizer lent the template only to save it
