"""constrained: tool calls that come out right at generation time.

Tool schemas are read once, faithfully, into typed frames; the grammar
emitters, the logits mask and the parser all work from that one reading.
"""

import warnings as _warnings
from importlib.metadata import version as _version

from .compiler import CheckResult, CompiledTools, compile_tools
from .dialects import DIALECTS, get_dialect, register_dialect
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
    ToolDefinitionError,
    UnknownDialectError,
    UnsatisfiableSchemaError,
)
from .frames.toolset import LeftOutTool
from .hf import ToolCallLogitsProcessor, ToolCallStoppingCriteria
from .options import CompileOptions
from .output.parse import ParseResult, RejectedCall, parse_tool_calls
from .output.render import render_tool_calls
from .output.repair import RepairResult, repair_arguments
from .output.stream import ToolCallStreamParser
from .runtime.constraint import ConstraintEvent, ToolCallConstraint
from .runtime.generate import GenerationResult, generate
from .runtime.models import load_model
from .tokenizers import Tokenizer, TokenizerError, load_tokenizer
from .tools import Tool, load_tools

__version__ = _version("constrained")

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
    """``CallError``: the old name of :class:`RejectedCall`, deprecated (it
    is a record of a rejected call, not an exception)."""
    if name == "CallError":
        _warnings.warn("constrained.CallError is deprecated; use constrained.RejectedCall", DeprecationWarning, stacklevel=2)
        return RejectedCall
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
