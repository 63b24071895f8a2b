"""The plug-in as SGLang loads it: through its entry point, in a process of
its own (SGLang loads plug-ins once per process), from SGLang's own
``load_plugins`` and argument parser."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from constrained.dialects import DIALECTS
from constrained.sglang import RELEASES

LOAD = "from sglang.srt.plugins import load_plugins\nload_plugins()\n"
DOCS = Path(__file__).resolve().parent.parent / "docs" / "sglang.md"
LAUNCH = "python -m sglang.launch_server "


def documented_arguments() -> list[str]:
    """The arguments of the server command docs/sglang.md gives."""
    (line,) = [line for line in DOCS.read_text().splitlines() if line.startswith(LAUNCH)]
    return shlex.split(line[len(LAUNCH) :])


def run_python(code: str, **environment: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a Python process of its own, with ``environment`` added."""
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env={**os.environ, **environment}
    )


def parse_flags(prelude: str = "", **environment: str) -> subprocess.CompletedProcess[str]:
    """SGLang's server argument parser on the documented command, after its plug-ins load."""
    code = (
        f"{prelude}\n{LOAD}"
        "from sglang.srt.server_args import prepare_server_args\n"
        f"args = prepare_server_args({documented_arguments()!r})\n"
        "print('parsed:', args.tool_call_parser, args.grammar_backend)\n"
    )
    return run_python(code, **environment)


def test_sglang_finds_the_plugin_through_its_entry_point():
    loaded = run_python(
        LOAD + "from sglang.srt.function_call.function_call_parser import FunctionCallParser\n"
        "from sglang.srt.constrained.base_grammar_backend import GRAMMAR_BACKEND_REGISTRY\n"
        "print(sorted(n for n in FunctionCallParser.ToolCallParserEnum if n.startswith('constrained_')))\n"
        "print('constrained' in GRAMMAR_BACKEND_REGISTRY)\n"
    )
    assert loaded.returncode == 0, loaded.stderr
    detectors, backend = loaded.stdout.strip().splitlines()[-2:]
    assert detectors == str([f"constrained_{d}" for d in sorted(DIALECTS)])
    assert backend == "True"


def test_the_documented_server_command_is_accepted_with_the_plugin_and_only_with_it():
    parsed = parse_flags()
    assert parsed.returncode == 0, parsed.stderr
    assert parsed.stdout.strip().splitlines()[-1] == "parsed: constrained_gemma4 constrained"
    without = parse_flags(SGLANG_PLUGINS="another")
    assert without.returncode != 0 and "invalid choice: 'constrained_gemma4'" in without.stderr


PRETEND_RELEASE = (
    "import importlib.metadata as metadata\n"
    "real = metadata.version\n"
    "metadata.version = lambda name: '0.5.24' if name == 'sglang' else real(name)\n"
)


def test_an_sglang_outside_the_supported_releases_is_refused_with_one_line():
    refused = parse_flags(PRETEND_RELEASE)
    assert refused.returncode != 0
    assert (
        "constrained.errors.EngineVersionError: constrained.sglang supports SGLang 0.5.23 and this is SGLang 0.5.24: "
        f"install one of those (pip install '{RELEASES.requirement()}'), or set {RELEASES.unchecked_variable}=1"
    ) in refused.stderr


def test_the_unchecked_variable_loads_the_plugin_with_a_warning():
    loaded = parse_flags(PRETEND_RELEASE, **{RELEASES.unchecked_variable: "1"})
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.strip().splitlines()[-1] == "parsed: constrained_gemma4 constrained"
    assert "RuntimeWarning: constrained.sglang is checked against SGLang 0.5.23 and this is SGLang 0.5.24" in loaded.stderr


def test_the_supported_releases():
    assert RELEASES.requirement() == "sglang>=0.5.23,<0.5.24"
    assert RELEASES.is_supported("0.5.23") and RELEASES.is_supported("0.5.23.post1")
    assert not RELEASES.is_supported("0.5.22") and not RELEASES.is_supported("0.5.24")
