"""The processor in llama.cpp itself: the embedded default model's GGUF
loaded by llama-cpp-python (no torch), its calls generated through
``generate(engine="llama-cpp")``, the command line, and llama-cpp-python's
own completion API with the processor and its stopping criterion. Needs
the ``llama-cpp`` extra (docs/generation.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from gguf import GGUFReader
from gguf.quants import dequantize
from llama_cpp import LogitsProcessorList, StoppingCriteriaList

from constrained import compile_tools, generate, load_model
from constrained.llama_cpp import ToolCallLogitsProcessor, default_gguf
from constrained.runtime.generate import build_prompt
from constrained.runtime.models import MARKER_SCALE, marker_rows

ROOT = Path(__file__).resolve().parent.parent
TIME_TOOLS = json.loads((ROOT / "examples" / "time.tools.json").read_text())
CASES = json.loads((ROOT / "tests" / "data" / "generation_cases.json").read_text())[:6]
MCP = ROOT / "tests" / "corpus" / "mcp"


@pytest.fixture(scope="module")
def loaded():
    return load_model(engine="llama-cpp")


def case_tools(case: dict) -> list[dict]:
    listing = json.loads((MCP / f"{case['server']}.tools.json").read_text())["tools"]
    by_name = {t["name"]: {"name": t["name"], "description": t.get("description", ""), "parameters": t["inputSchema"]}
               for t in listing}
    return [by_name[name] for name in case["tools"]]


def test_the_default_gguf_has_the_marker_rows_of_the_transformers_conversion(loaded):
    (embedding,) = [t for t in GGUFReader(default_gguf()).tensors if t.name == "token_embd.weight"]

    def row(token: int) -> np.ndarray:
        return dequantize(np.asarray(embedding.data[token : token + 1]), embedding.tensor_type)[0]

    for target, source in marker_rows(loaded.tokenizer).items():
        assert np.allclose(row(target), row(source) * MARKER_SCALE, rtol=1e-3, atol=1e-4)
        assert not np.allclose(row(target), row(source))


@pytest.mark.parametrize("case", CASES, ids=[f"{c['server']}-{c['tool_choice']}" for c in CASES])
def test_generation_cases_give_valid_calls_under_llama_cpp(loaded, case):
    tools = case_tools(case)
    result = generate(loaded.model, loaded.tokenizer, case["prompt"], tools, "gemma4", tool_choice=case["tool_choice"],
                      reasoning=False, max_new_tokens=128, engine="llama-cpp")
    assert result.finished and result.errors == [] and result.events == []
    assert result.tool_calls
    schemas = {tool["name"]: tool["parameters"] for tool in tools}
    for call in result.tool_calls:
        name = call["function"]["name"]
        assert case["tool_choice"] in ("required", name)
        jsonschema.validate(json.loads(call["function"]["arguments"]), schemas[name])


def test_without_the_constraint_the_model_writes_no_call(loaded):
    result = generate(loaded.model, loaded.tokenizer, "What time is it in Paris?", TIME_TOOLS, "gemma4",
                      tool_choice="required", reasoning=False, max_new_tokens=24, constrain=False, engine="llama-cpp")
    assert result.tool_calls == [] and not result.finished


def test_llama_cpps_completion_api_with_the_processor_and_its_stop(loaded):
    compiled = compile_tools(TIME_TOOLS, "gemma4", loaded.tokenizer, tool_choice="get_current_time", reasoning=False)
    prompt = loaded.tokenizer.encode(build_prompt("What time is it in Tokyo?", compiled))
    processor = ToolCallLogitsProcessor(compiled)
    completion = loaded.model.create_completion(
        prompt, max_tokens=128, temperature=0.0, logits_processor=LogitsProcessorList([processor]),
        stopping_criteria=StoppingCriteriaList([processor.stop]),
    )
    assert completion["choices"][0]["finish_reason"] == "stop"  # the processor's stop, long before max_tokens
    assert completion["usage"]["completion_tokens"] < 128
    assert processor.finished and processor.events == []


def test_the_command_line_runs_llama_cpp():
    done = subprocess.run(
        [sys.executable, "-m", "constrained", "generate", str(ROOT / "examples" / "time.tools.json"), "--prompt",
         "What time is it in Paris?", "--tool-choice", "required", "--engine", "llama-cpp", "--max-new-tokens", "64"],
        capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["finished"] and [call["function"]["name"] for call in result["tool_calls"]] == ["get_current_time"]
    assert "Loading weights" not in done.stderr and "converting" not in done.stderr


def test_the_documented_example_runs_as_shown(tmp_path):
    """docs/generation.md's llama.cpp example (not run by tests/test_docs.py,
    whose environment has no llama.cpp)."""
    text = (ROOT / "docs" / "generation.md").read_text()
    section = text[text.index("## llama.cpp (`constrained.llama_cpp`)"):]
    block = section[section.index("```python notest\n") + len("```python notest\n"):]
    block = block[: block.index("```\n")]
    done = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "'name': 'get_current_time'" in done.stdout
