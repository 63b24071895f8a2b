"""The server command in the README and in docs/vllm.md is the one the
tests and the benchmark run (``constrained.vllm.launch``), flag for flag."""

from __future__ import annotations

import shlex
from pathlib import Path

from constrained.dialects import DIALECTS
from constrained.vllm import PARSER_NAMES
from constrained.vllm.launch import OFFLINE_ENVIRONMENT, plugin_flags, server_command

ROOT = Path(__file__).resolve().parent.parent
PAGES = (ROOT / "README.md", ROOT / "docs" / "vllm.md")


def serving_blocks(page: Path) -> list[str]:
    """The page's ``sh`` blocks that export the model and start the server."""
    blocks = [block.split("```", 1)[0].split("\n", 1)[1] for block in page.read_text().split("```sh")[1:]]
    return [block for block in blocks if "export-model" in block]


def test_the_documented_server_command_is_the_launchers() -> None:
    for page in PAGES:
        (block,) = serving_blocks(page)
        export, serve = block.replace("\\\n", " ").strip().splitlines()
        assert shlex.split(export) == ["constrained", "export-model", "./gemma3-270m-gemma4"]
        words = shlex.split(serve)
        environment = dict(word.split("=", 1) for word in words[:2])
        assert environment == OFFLINE_ENVIRONMENT
        assert words[2:] == server_command("./gemma3-270m-gemma4", plugin_flags(), port=8000)


def test_every_dialect_has_a_parser() -> None:
    assert PARSER_NAMES == tuple(f"constrained_{d}" for d in sorted(DIALECTS))
    assert "constrained_deepseek_v4" in PARSER_NAMES


def test_a_launched_vllm_server_caches_under_the_cache_root(tmp_path: Path, monkeypatch) -> None:
    """vLLM's own caches (compiled graphs, ...) go to <root>/vllm unless VLLM_CACHE_ROOT says otherwise."""
    from constrained.vllm import launch

    started: list[dict[str, str]] = []
    monkeypatch.setattr(launch.subprocess, "Popen", lambda command, **kwargs: started.append(kwargs["env"]))
    monkeypatch.setenv("CONSTRAINED_CACHE", str(tmp_path / "root"))
    monkeypatch.delenv("VLLM_CACHE_ROOT", raising=False)
    launch.VllmServer(tmp_path / "model", [], tmp_path / "log")
    monkeypatch.setenv("VLLM_CACHE_ROOT", str(tmp_path / "mine"))
    launch.VllmServer(tmp_path / "model", [], tmp_path / "log")
    assert [env["VLLM_CACHE_ROOT"] for env in started] == [str(tmp_path / "root" / "vllm"), str(tmp_path / "mine")]
