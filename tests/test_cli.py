"""The command line, run as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from corpus import CORPUS
from sample_tools import WRITE_FILE_WITH_BOUNDED_MODE


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "constrained", *args], capture_output=True, text=True, timeout=120)


def test_normalize_prints_frames_and_warnings():
    result = run("normalize", str(CORPUS / "mcp" / "aws-pricing.tools.json"))
    assert result.returncode == 0, result.stderr
    tools = json.loads(result.stdout)
    assert len(tools) == 9
    get_pricing = next(t for t in tools if t["name"] == "get_pricing")
    assert get_pricing["root"]["kind"] == "object"
    assert get_pricing["root"]["required"] == ["service_code"]
    assert get_pricing["warnings"] == []


def test_a_bad_tool_is_listed_as_left_out_beside_the_good_ones(tmp_path):
    path = tmp_path / "tools.json"
    path.write_text(json.dumps([
        {"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "strnig"}}}},
        {"name": "g", "parameters": {"type": "object", "properties": {"y": {"type": "string"}}}},
    ]))
    result = run("normalize", str(path))
    assert result.returncode == 1, result.stderr
    good, bad = json.loads(result.stdout)
    assert good["name"] == "g" and good["root"]["kind"] == "object"
    assert bad["name"] == "f" and bad["left_out"]["path"] == "/properties/x" and "strnig" in bad["left_out"]["reason"]
    compiled = run("compile", str(path), "--dialect", "hermes")
    assert compiled.returncode == 0, compiled.stderr
    summary = json.loads(compiled.stdout)
    assert summary["tools"] == ["g"] and summary["left_out"][0]["name"] == "f"


def test_a_tools_file_that_is_not_json_is_a_clear_error(tmp_path):
    path = tmp_path / "tools.json"
    path.write_text("[{")
    result = run("normalize", str(path))
    assert result.returncode == 2
    assert "not valid JSON" in result.stderr


# The tools file the commands read: write_file as an OpenAI tools entry.
WRITE_FILE_TOOLS = [{"type": "function", "function": WRITE_FILE_WITH_BOUNDED_MODE}]
QWEN_CALL = "<tool_call>\n<function=write_file>\n<parameter=path>\na.txt\n</parameter>\n<parameter=content>\n  x\n\n</parameter>\n</function>\n</tool_call>"


def tools_file(tmp_path):
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(WRITE_FILE_TOOLS))
    return str(path)


def test_render_writes_the_template_bytes(tmp_path):
    calls = json.dumps([{"name": "write_file", "arguments": {"path": "a.txt", "content": "  x\n"}}])
    result = run("render", tools_file(tmp_path), "--dialect", "qwen3_coder", calls)
    assert result.returncode == 0, result.stderr
    assert result.stdout == QWEN_CALL + "\n"


def test_check_accepts_a_complete_call_from_stdin(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "constrained", "check", tools_file(tmp_path), "--dialect", "qwen3_coder"],
        input=QWEN_CALL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ""


def test_check_reports_the_first_rejected_token(tmp_path):
    text = QWEN_CALL.replace("<parameter=path>\na.txt\n</parameter>\n", "")
    result = run("check", tools_file(tmp_path), "--dialect", "qwen3_coder", text)
    assert result.returncode == 1
    report = json.loads(result.stdout)
    prefix = "<tool_call>\n<function=write_file>\n<parameter="
    assert report["accepted"] is False
    assert report["byte_offset"] <= len(prefix.encode()) <= report["byte_offset"] + len("content")
    assert report["token_index"] > 0
    # What was refused, and what came before it, as text.
    assert prefix.startswith(report["before"]) and report["before"] + report["refused"] in text


@pytest.mark.slow
def test_check_rejects_a_value_out_of_bounds(tmp_path):
    text = QWEN_CALL.replace("</function>", "<parameter=mode>\n600\n</parameter>\n</function>")
    assert run("check", tools_file(tmp_path), "--dialect", "qwen3_coder", text).returncode == 1
    ok = QWEN_CALL.replace("</function>", "<parameter=mode>\n420\n</parameter>\n</function>")
    assert run("check", tools_file(tmp_path), "--dialect", "qwen3_coder", ok).returncode == 0


@pytest.mark.slow
def test_check_required_rejects_plain_text(tmp_path):
    result = run("check", tools_file(tmp_path), "--dialect", "gemma4", "--tool-choice", "required", "hello")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    # Under required, only a call's opening (or the reasoning's) may start the output: what was expected there.
    assert report == {"accepted": False, "token_index": 0, "byte_offset": 0, "allowed_tokens": 2,
                      "allowed_markers": ["<|tool_call>", "<|channel>"], "before": "", "refused": "hello"}
    cut = run("check", tools_file(tmp_path), "--dialect", "gemma4", "--tool-choice", "required", "<|tool_call>call:")
    assert "the end of the turn" in json.loads(cut.stdout)["refused"]


def test_compile_saves_an_artifact(tmp_path):
    out = tmp_path / "compiled.json"
    result = run("compile", tools_file(tmp_path), "--dialect", "hermes", "-o", str(out))
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["tools"] == ["write_file"] and summary["tokenizer"] == "qwen3"
    saved = json.loads(out.read_text())
    assert saved["fingerprint"] == summary["fingerprint"]
    assert "write_file" in saved["grammar"]


def test_unknown_dialect_is_a_usage_error(tmp_path):
    result = run("compile", tools_file(tmp_path), "--dialect", "llama")
    assert result.returncode == 2
    assert "invalid choice: 'llama'" in result.stderr


def test_parse_prints_typed_calls_and_errors(tmp_path):
    result = run("parse", tools_file(tmp_path), "--dialect", "qwen3_coder", "Done.\n" + QWEN_CALL)
    assert result.returncode == 0, result.stderr
    parsed = json.loads(result.stdout)
    assert parsed["content"] == "Done.\n" and parsed["errors"] == []
    (call,) = parsed["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {"path": "a.txt", "content": "  x\n"}
    broken = run("parse", tools_file(tmp_path), "--dialect", "qwen3_coder", QWEN_CALL.replace("write_file", "rm"))
    report = json.loads(broken.stdout)
    assert report["tool_calls"] == [] and report["errors"][0]["tool"] == "rm"
    assert broken.returncode == 1  # a rejected call, as normalize exits 1 on a left-out tool


def test_the_version_is_the_packages():
    from importlib.metadata import version

    import constrained

    assert constrained.__version__ == version("constrained")
    result = run("--version")
    assert result.returncode == 0 and result.stdout == f"constrained {constrained.__version__}\n"
