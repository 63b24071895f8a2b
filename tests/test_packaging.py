"""What a non-editable install ships: every package of ``constrained/`` and
the grammar files (an editable install would hide a package left out)."""

from __future__ import annotations

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
