"""The package's layout is its pipeline: each layer imports only from the
layers before it (and from itself), so the tree reads from JSON Schema to
tool calls, and nothing runs in circles."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "constrained"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "options", "caches"),  # what every layer may raise or take, and its bounded caches
    ("schema",),  # JSON Schema as written: keywords, $ref, formats, patterns, validation
    ("tools",),  # tool definitions in any format -> Tool
    ("frames",),  # the typed intermediate form, made from JSON Schema
    ("tokenizers",),  # vocabularies
    ("grammar",),  # building blocks of llguidance grammars
    ("dialects",),  # each dialect's markup: grammar rules, scanner, renderer
    ("compiler",),  # tools + dialect + tokenizer -> one compiled constraint
    ("output",),  # model text -> tool calls (parse, stream, render, repair)
    ("runtime",),  # the constraint at sampling time, the generate loop, models
    ("qa",),  # fuzzing and conformance
    ("hf", "vllm", "sglang", "llama_cpp", "cli", "__main__", "__init__"),  # integrations and the public surface
)
LAYER_OF = {name: index for index, names in enumerate(LAYERS) for name in names}


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _top(path: Path) -> str:
    """The layer name of a module: its first component under the package."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return parts[0]


def _imported(path: Path) -> list[tuple[int, str]]:
    """(line, first component under ``constrained``) of every import of the
    package from ``path``, wherever it stands (function-level imports too)."""
    package = path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = [*base, *(node.module.split(".") if node.module else [])]
                if len(target) == 1:  # "from .. import x": x is the module
                    found += [(node.lineno, alias.name) for alias in node.names]
                    continue
            elif node.module and node.module.split(".")[0] == "constrained":
                target = node.module.split(".")
            else:
                continue
            found.append((node.lineno, target[1]))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name.split(".")[1]) for a in node.names if a.name.startswith("constrained.")]
    return found


def test_every_module_belongs_to_a_layer():
    unplaced = sorted({_top(path) for path in _modules()} - set(LAYER_OF))
    assert not unplaced, f"add these to LAYERS (and the layout table in docs/design.md): {unplaced}"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_run_down_the_pipeline(path):
    own = LAYER_OF[_top(path)]
    upward = [
        f"line {line}: imports constrained.{target} (layer {LAYER_OF.get(target)}) from layer {own}"
        for line, target in _imported(path)
        if LAYER_OF.get(target, own + 1) > own
    ]
    assert not upward, upward


@pytest.mark.parametrize(
    "path", [p for p in _modules() if p.name != "__init__.py"], ids=lambda p: str(p.relative_to(PACKAGE))
)
def test_no_module_imports_its_own_package_init(path):
    """A module that imports names from its own package's ``__init__`` runs
    in a circle with it (the ``__init__`` imports the module)."""
    tree = ast.parse(path.read_text(), str(path))
    own = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level == 1 and not node.module]
    assert not own, f"{path.name} imports its own package at lines {own}"


def test_the_layout_table_is_the_tree():
    """The layout table in docs/design.md names every module where it lives,
    and its rows come in the order of the layers."""
    design = (PACKAGE.parent / "docs" / "design.md").read_text()
    table = design[design.index("## Layout in detail") : design.index("## Adding a dialect")]
    rows = [line for line in table.splitlines() if line.startswith("| `constrained/")]
    missing = []
    for path in _modules():
        relative = path.relative_to(PACKAGE)
        if len(relative.parts) == 1:
            if relative.name not in ("__main__.py",) and f"`constrained/{relative.name}`" not in table:
                missing.append(str(relative))
            continue
        row = next((r for r in rows if r.startswith(f"| `constrained/{relative.parts[0]}/`")), "")
        if relative.name != "__init__.py" and f"`{relative.name}`" not in row:
            missing.append(str(relative))
    assert not missing, f"the layout table in docs/design.md does not name: {missing}"
    layers = [LAYER_OF[row.split("`")[1].removeprefix("constrained/").rstrip("/").removesuffix(".py")] for row in rows]
    assert layers == sorted(layers), "the layout table's rows are not in layer order"


def test_the_runtime_knows_no_dialect_by_its_class():
    """The runtime reads dialects through the registry and the interface
    (``Dialect``, ``Markers``, the raw-text syntax a dialect declares),
    never a concrete dialect's module: a dialect registered from outside
    the package gets everything a built-in does."""
    from constrained.dialects import DIALECTS

    concrete = {type(dialect).__module__.split(".")[-1] for dialect in DIALECTS.values()
                if type(dialect).__module__.startswith("constrained.dialects.")}
    assert {"gemma", "hermes", "glm", "qwen3_coder"} <= concrete
    reaching = []
    for path in sorted((PACKAGE / "runtime").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("dialects."):
                if node.module.removeprefix("dialects.") in concrete:
                    reaching.append(f"{path.name}:{node.lineno} imports from {node.module}")
    assert not reaching, reaching
