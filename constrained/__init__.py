"""constrained: tool calls that come out right at generation time.

Tool schemas are read once, faithfully, into typed frames; the grammar
emitters, the logits mask and the parser all work from that one reading.
"""

import importlib as _importlib
import typing as _typing
import warnings as _warnings

from .caches import clear_caches
from .errors import (
    ArgumentError,
    BudgetError,
    CompileError,
    ConstrainedError,
    ConstraintError,
    DialectError,
    GenerationError,
    MissingExtraError,
    OptionError,
    SchemaError,
    SchemaLimitError,
    SchemaWarning,
    StreamClosedError,
    TokenizerError,
    ToolDefinitionError,
    UnknownDialectError,
    UnsatisfiableSchemaError,
)
from .options import CompileOptions

if _typing.TYPE_CHECKING:
    from .compiler import CheckResult, CompiledTools, compile_tools
    from .dialects import DIALECTS, get_dialect, register_dialect
    from .frames.toolset import LeftOutTool
    from .hf import ToolCallLogitsProcessor, ToolCallStoppingCriteria
    from .output.parse import ParseResult, RejectedCall, parse_tool_calls
    from .output.render import render_tool_calls
    from .output.repair import RepairResult, repair_arguments
    from .output.stream import ToolCallStreamParser
    from .runtime.constraint import ConstraintEvent, ToolCallConstraint
    from .runtime.generate import GenerationResult, generate
    from .runtime.models import load_model
    from .tokenizers import Tokenizer, load_tokenizer
    from .tools import Tool, load_tools

    __version__: str

_LAZY = {
    ".compiler": ("CheckResult", "CompiledTools", "compile_tools"),
    ".dialects": ("DIALECTS", "get_dialect", "register_dialect"),
    ".frames.toolset": ("LeftOutTool",),
    ".hf": ("ToolCallLogitsProcessor", "ToolCallStoppingCriteria"),
    ".output.parse": ("ParseResult", "RejectedCall", "parse_tool_calls"),
    ".output.render": ("render_tool_calls",),
    ".output.repair": ("RepairResult", "repair_arguments"),
    ".output.stream": ("ToolCallStreamParser",),
    ".runtime.constraint": ("ConstraintEvent", "ToolCallConstraint"),
    ".runtime.generate": ("GenerationResult", "generate"),
    ".runtime.models": ("load_model",),
    ".tokenizers": ("Tokenizer", "load_tokenizer"),
    ".tools": ("Tool", "load_tools"),
}
"""Where each name that needs more than the errors and options is defined:
imported on first use, so ``import constrained`` stays fast (the grammar
emitters, numpy and jsonschema load with the first compile or parse, torch
with the first constraint)."""
_MODULE_OF = {name: module for module, names in _LAZY.items() for name in names}

# The public surface: entry points, their options and results, and the
# errors. Everything else is reached from its module and may change.
__all__ = [
    "DIALECTS",
    "ArgumentError",
    "BudgetError",
    "CheckResult",
    "CompileError",
    "CompileOptions",
    "CompiledTools",
    "ConstrainedError",
    "ConstraintError",
    "ConstraintEvent",
    "DialectError",
    "GenerationError",
    "GenerationResult",
    "LeftOutTool",
    "MissingExtraError",
    "OptionError",
    "ParseResult",
    "RejectedCall",
    "RepairResult",
    "SchemaError",
    "SchemaLimitError",
    "SchemaWarning",
    "StreamClosedError",
    "Tokenizer",
    "TokenizerError",
    "Tool",
    "ToolCallConstraint",
    "ToolCallLogitsProcessor",
    "ToolCallStoppingCriteria",
    "ToolCallStreamParser",
    "ToolDefinitionError",
    "UnknownDialectError",
    "UnsatisfiableSchemaError",
    "__version__",
    "clear_caches",
    "compile_tools",
    "generate",
    "get_dialect",
    "load_model",
    "load_tokenizer",
    "load_tools",
    "parse_tool_calls",
    "register_dialect",
    "render_tool_calls",
    "repair_arguments",
]


def __getattr__(name: str) -> object:
    """The names of :data:`_LAZY`, imported on first use and kept; the
    version, read from the installed metadata; ``CallError``: the old name
    of :class:`RejectedCall`, deprecated (it is a record of a rejected
    call, not an exception)."""
    module = _MODULE_OF.get(name)
    if module is not None:
        value = getattr(_importlib.import_module(module, __name__), name)
    elif name == "__version__":
        from importlib.metadata import version

        value = version("constrained")
    elif name == "CallError":
        _warnings.warn("constrained.CallError is deprecated; use constrained.RejectedCall", DeprecationWarning, stacklevel=2)
        return __getattr__("RejectedCall")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
