"""The public surface: what ``constrained`` exports is a short, documented
list; everything else is reached from its module."""

import re
import subprocess
import sys
import types
from pathlib import Path

import constrained

DOCS = Path(__file__).resolve().parent.parent / "docs" / "api.md"

PUBLIC = {
    # entry points
    "compile_tools", "parse_tool_calls", "ToolCallStreamParser", "render_tool_calls", "repair_arguments",
    "generate", "load_model", "load_tools", "load_tokenizer", "get_dialect", "register_dialect", "DIALECTS",
    # options and results
    "CompileOptions", "CompiledTools", "CheckResult", "ToolCallConstraint", "ConstraintEvent", "ParseResult",
    "RejectedCall", "RepairResult", "GenerationResult", "LeftOutTool", "Tool", "Tokenizer",
    # the transformers hook
    "ToolCallLogitsProcessor", "ToolCallStoppingCriteria",
    # errors
    "ConstrainedError", "ArgumentError", "BudgetError", "CompileError", "ConstraintError", "DialectError", "GenerationError", "OptionError",
    "SchemaError", "SchemaLimitError", "SchemaWarning", "StreamClosedError", "ToolDefinitionError",
    "UnknownDialectError", "UnsatisfiableSchemaError", "TokenizerError", "MissingExtraError",
    "__version__",
    # the caches
    "clear_caches",
}


def test_the_package_exports_the_public_names_and_no_others():
    assert set(constrained.__all__) == PUBLIC
    for name in constrained.__all__:
        assert getattr(constrained, name) is not None
    public_looking = {
        name for name, value in vars(constrained).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert public_looking <= PUBLIC, f"exported outside __all__: {sorted(public_looking - PUBLIC)}"


def test_every_public_name_is_documented():
    documented = set(re.findall(r"`(?:constrained\.)?(\w+)`", DOCS.read_text(encoding="utf-8")))
    missing = sorted(PUBLIC - documented)
    assert not missing, f"docs/api.md does not document {missing}"


def test_the_removed_names_are_reached_from_their_modules():
    from constrained.frames.normalize import normalize_schema
    from constrained.frames.toolset import normalize_tools
    from constrained.runtime.constraint import RowState, fill_masks_together
    from constrained.tools import load_tools_file

    assert callable(normalize_schema) and callable(normalize_tools) and callable(fill_masks_together)
    assert RowState.__name__ == "RowState" and callable(load_tools_file)
    assert not hasattr(constrained, "normalize_schema")


HEAVY = ("torch", "transformers", "gguf", "numpy", "lark", "jsonschema", "referencing", "llguidance", "regex", "re2",
         "importlib.metadata", "constrained.compiler", "constrained.dialects", "constrained.runtime.constraint")
"""What ``import constrained`` must not load: each is imported with the
first name that needs it."""


def loaded_after(code: str, modules: tuple[str, ...]) -> list[str]:
    """Which of ``modules`` a fresh interpreter holds after running ``code``."""
    script = f"import sys\n{code}\nprint(sorted(m for m in {modules!r} if m in sys.modules))"
    return eval(subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout)


def test_importing_the_package_loads_nothing_heavy():
    assert loaded_after("import constrained", HEAVY) == []


def test_a_parser_loads_no_torch_nor_llguidance_and_compiles_no_format_regex():
    code = (
        "import constrained\nconstrained.parse_tool_calls\n"
        "from constrained.schema.formats import format_regex\nassert format_regex.cache_info().currsize == 0"
    )
    assert loaded_after(code, ("torch", "transformers", "llguidance", "numpy")) == []


def test_the_lazy_names_are_listed_and_kept():
    assert set(constrained.__all__) <= set(dir(constrained))
    assert constrained.compile_tools is constrained.compile_tools
    from constrained.compiler import compile_tools

    assert constrained.compile_tools is compile_tools
