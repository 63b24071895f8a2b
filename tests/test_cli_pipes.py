"""The command line in pipes and on a first try: stdin for any argument,
the trailing newline of a pipe, render checking what it writes, and the
messages on stderr that say what happened."""

from __future__ import annotations

import io
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from test_cli_docs import status as main_status

from constrained.cli import EXIT_OK, EXIT_REJECTED, EXIT_USAGE
from constrained.output.parse import RejectedCall
from constrained.runtime import generate as generate_module
from constrained.runtime import models
from constrained.runtime.generate import GenerationResult
from constrained.runtime.models import LoadedModel

ROOT = Path(__file__).resolve().parent.parent
TIME_TOOLS = str(ROOT / "examples" / "time.tools.json")
SPEED_TOOLS = [
    {"name": "set_speed", "parameters": {"type": "object", "properties": {"speed": {"type": "number", "maximum": 2.5}},
                                         "required": ["speed"]}},
    {"name": "bad", "parameters": {"type": "object", "properties": {"x": {"type": "strnig"}}}},
]
TOKYO = [{"name": "get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}]


def speed_tools(tmp_path: Path) -> str:
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(SPEED_TOOLS))
    return str(path)


def status(argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
           stdin: str | None = None) -> tuple[int, str, str]:
    """main's exit status (argparse's SystemExit included), stdout and stderr, with ``stdin`` piped in."""
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    return main_status(argv, capsys)


# -- pipes: the trailing newline, and - for every argument -------------------------


@pytest.mark.slow
@pytest.mark.parametrize("dialect", ["qwen3_coder", "gemma4"])
def test_render_piped_into_check_and_parse(dialect):
    """A real shell pipe: render ends its text with a newline, which check and parse do not read as output."""
    constrained = f"{shlex.quote(sys.executable)} -m constrained"
    render = f"{constrained} render {TIME_TOOLS} --dialect {dialect} {shlex.quote(json.dumps(TOKYO))}"
    check = subprocess.run(["bash", "-o", "pipefail", "-c", f"{render} | {constrained} check {TIME_TOOLS} --dialect {dialect} -"],
                           capture_output=True, text=True, timeout=120)
    assert (check.returncode, check.stdout) == (0, ""), check.stdout + check.stderr
    parse = subprocess.run(["bash", "-o", "pipefail", "-c", f"{render} | {constrained} parse {TIME_TOOLS} --dialect {dialect}"],
                           capture_output=True, text=True, timeout=120)
    parsed = json.loads(parse.stdout)
    assert parse.returncode == 0 and parsed["content"] == "" and len(parsed["tool_calls"]) == 1


def test_text_from_stdin_loses_exactly_one_trailing_newline(capsys, monkeypatch):
    for piped, content in [("Done.\n", "Done."), ("Done.\n\n", "Done.\n"), ("Done.", "Done.")]:
        code, out, _ = status(["parse", TIME_TOOLS, "--dialect", "hermes", "-"], capsys, monkeypatch, piped)
        assert code == EXIT_OK and json.loads(out)["content"] == content, piped
    # Given on the command line, the text is taken as it is.
    code, out, _ = status(["parse", TIME_TOOLS, "--dialect", "hermes", "Done.\n"], capsys, monkeypatch)
    assert json.loads(out)["content"] == "Done.\n"


def test_tools_from_stdin(capsys, monkeypatch):
    tools = Path(TIME_TOOLS).read_text()
    code, out, _ = status(["compile", "-", "--dialect", "gemma4"], capsys, monkeypatch, tools)
    assert code == EXIT_OK and json.loads(out)["tools"] == ["get_current_time", "convert_time"]
    code, out, _ = status(["normalize", "-"], capsys, monkeypatch, tools)
    assert code == EXIT_OK and [tool["name"] for tool in json.loads(out)] == ["get_current_time", "convert_time"]
    call = '<tool_call>\n{"name": "get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}\n</tool_call>'
    assert status(["check", "-", "--dialect", "hermes", call], capsys, monkeypatch, tools) == (EXIT_OK, "", "")
    code, out, _ = status(["render", "-", "--dialect", "hermes", json.dumps(TOKYO)], capsys, monkeypatch, tools)
    assert (code, out) == (EXIT_OK, call + "\n")
    code, out, err = status(["compile", "-", "--dialect", "gemma4"], capsys, monkeypatch, "[{")
    assert (code, out) == (EXIT_USAGE, "") and err.startswith("constrained: error: TOOLS (stdin): not valid JSON")


@pytest.mark.parametrize("command", [["check", "-", "--dialect", "hermes"], ["parse", "-", "--dialect", "hermes", "-"],
                                     ["render", "-", "--dialect", "hermes"]])
def test_only_one_argument_may_read_stdin(command, capsys, monkeypatch):
    code, out, err = status(command, capsys, monkeypatch, "[]")
    assert (code, out) == (EXIT_USAGE, "")
    assert "only one argument may be - (stdin)" in err.splitlines()[-1]


# -- render checks what it writes ---------------------------------------------------


def test_render_rejects_a_call_its_schema_rejects(tmp_path, capsys, monkeypatch):
    calls = [{"name": "set_speed", "arguments": {"speed": 1}}, {"name": "set_speed", "arguments": {"speed": 5}}]
    for dialect in ["hermes", "qwen3_coder", "gemma4"]:
        code, out, err = status(["render", speed_tools(tmp_path), "--dialect", dialect, json.dumps(calls)], capsys,
                                monkeypatch)
        assert code == EXIT_REJECTED and out.endswith("\n"), dialect  # the text is still written
        (line,) = err.splitlines()
        assert line.startswith("constrained: error: call 1 of 'set_speed': "), line


def test_render_names_a_missing_key(capsys, monkeypatch):
    calls = json.dumps([{"type": "function", "function": {"name": "get_current_time", "arguments": "{}"}}])
    code, _, err = status(["render", TIME_TOOLS, "--dialect", "hermes", calls], capsys, monkeypatch)
    assert code == EXIT_REJECTED and "call 0 of 'get_current_time'" in err and "timezone" in err


def test_render_rejects_a_value_that_reads_back_as_another(tmp_path, capsys, monkeypatch):
    # qwen3_coder writes the string "1" bare: the parser reads it back as the number the schema asks for.
    calls = json.dumps([{"name": "set_speed", "arguments": {"speed": "1"}}])
    code, _, err = status(["render", speed_tools(tmp_path), "--dialect", "qwen3_coder", calls], capsys, monkeypatch)
    assert code == EXIT_REJECTED
    assert 'call 0 of \'set_speed\': its text parses back as the arguments {"speed": 1}' in err


def test_render_takes_one_call_alone_and_refuses_what_is_no_call(capsys, monkeypatch):
    code, out, _ = status(["render", TIME_TOOLS, "--dialect", "hermes", json.dumps(TOKYO[0])], capsys, monkeypatch)
    assert code == EXIT_OK and "get_current_time" in out
    for calls in ["[1]", '"get_current_time"']:
        code, out, err = status(["render", TIME_TOOLS, "--dialect", "hermes", calls], capsys, monkeypatch)
        assert (code, out) == (EXIT_USAGE, "") and err.startswith("constrained: error: CALLS: not a JSON list of calls")


# -- check, compile and generate say why ---------------------------------------------


def test_check_refusal_has_the_parsers_reason(tmp_path, capsys, monkeypatch):
    text = "<tool_call>\n<function=set_speed>\n<parameter=speed>\n5\n</parameter>\n</function>\n</tool_call>"
    code, out, _ = status(["check", speed_tools(tmp_path), "--dialect", "qwen3_coder", text], capsys, monkeypatch)
    report = json.loads(out)
    assert code == EXIT_REJECTED and report["reason"].startswith("tool 'set_speed': ") and "speed" in report["reason"]
    # Plain text the constraint refuses has no call to blame: no reason.
    code, out, _ = status(["check", TIME_TOOLS, "--dialect", "gemma4", "--tool-choice", "required", "hello"], capsys,
                          monkeypatch)
    assert code == EXIT_REJECTED and "reason" not in json.loads(out)


def test_compile_prints_tools_left_out_and_warnings_on_stderr(tmp_path, capsys, monkeypatch):
    tools = SPEED_TOOLS + [{"name": "label", "parameters": {"type": "object", "properties": {
        "text": {"type": "string", "maxLenght": 3}, "mode": {"not": {"const": "x"}}}}}]
    path = tmp_path / "warned.json"
    path.write_text(json.dumps(tools))
    code, out, err = status(["compile", str(path), "--dialect", "hermes"], capsys, monkeypatch)
    summary = json.loads(out)
    assert code == EXIT_OK and summary["tools"] == ["set_speed", "label"]
    lines = err.splitlines()
    assert all(line.startswith("constrained: warning: ") for line in lines) and len(lines) == 3, lines
    assert lines[0].startswith("constrained: warning: tool 'bad' left out at /properties/x: unknown type 'strnig'")
    assert any("tool 'label': /properties/text: maxLenght:" in line and "'maxLength'" in line for line in lines)
    assert any("tool 'label': /properties/mode: not:" in line for line in lines)
    assert len(summary["warnings"]) == 3 and summary["left_out"][0]["name"] == "bad"  # the JSON as before
    assert status(["compile", TIME_TOOLS, "--dialect", "hermes"], capsys, monkeypatch)[2] == ""


def fake_generation(monkeypatch: pytest.MonkeyPatch, result: GenerationResult) -> None:
    """``generate`` without a model: load_model and the generation loop give back what the test says."""
    monkeypatch.setattr(models, "load_model", lambda *args, **kwargs: LoadedModel(None, None, "gemma4", name="fake"))
    monkeypatch.setattr(generate_module, "generate", lambda *args, **kwargs: result)


def test_generate_under_auto_says_when_the_model_made_no_call(capsys, monkeypatch):
    monkeypatch.setattr(models, "converted_default_model", lambda: Path("."))
    fake_generation(monkeypatch, GenerationResult("It is noon.", [], "It is noon.", [], [], None, True))
    code, out, err = status(["generate", TIME_TOOLS, "--prompt", "hi"], capsys, monkeypatch)
    assert code == EXIT_OK and json.loads(out)["content"] == "It is noon."
    assert err.startswith("constrained: note: the model answered without a tool call") and "--tool-choice required" in err
    assert status(["generate", TIME_TOOLS, "--prompt", "hi", "--tool-choice", "none"], capsys, monkeypatch)[2] == ""
    rejected = GenerationResult("<tool_call>", [], "<tool_call>", [], [RejectedCall("broken", None, (0, 11))], None, True)
    fake_generation(monkeypatch, rejected)
    assert status(["generate", TIME_TOOLS, "--prompt", "hi"], capsys, monkeypatch)[::2] == (EXIT_REJECTED, "")


def test_generate_quiet_leaves_out_the_progress_output(capsys, monkeypatch):
    logging = pytest.importorskip("transformers.utils.logging")
    monkeypatch.setattr(models, "converted_default_model", lambda: None)  # as on a first run
    call = {"id": "call_1", "type": "function", "function": {"name": "get_current_time", "arguments": "{}"}}
    fake_generation(monkeypatch, GenerationResult("", [], "", [call], [], None, True))
    code, _, err = status(["generate", TIME_TOOLS, "--prompt", "hi"], capsys, monkeypatch)
    assert code == EXIT_OK and "converting the default model once" in err
    verbosity = logging.get_verbosity()
    try:
        code, _, err = status(["generate", TIME_TOOLS, "--prompt", "hi", "--quiet"], capsys, monkeypatch)
        assert (code, err) == (EXIT_OK, "")
        assert not logging.is_progress_bar_enabled() and logging.get_verbosity() == logging.ERROR
    finally:
        logging.enable_progress_bar()
        logging.set_verbosity(verbosity)
