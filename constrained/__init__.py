"""constrained: tool calls that come out right at generation time.

Tool schemas are read once, faithfully, into typed frames; the grammar
emitters, the logits mask and the parser all work from that one reading.
"""

import warnings as _warnings
from importlib.metadata import version as _version

from .compiler import CheckResult, CompiledTools, compile_tools
from .runtime.constraint import ConstraintEvent, RowState, ToolCallConstraint, fill_masks_together
from .dialects import DIALECTS
from .errors import (
    ArgumentError,
    CompileError,
    ConstrainedError,
    ConstraintError,
    GenerationError,
    OptionError,
    SchemaError,
    SchemaLimitError,
    SchemaWarning,
    StreamClosedError,
    ToolDefinitionError,
    UnknownDialectError,
    UnsatisfiableSchemaError,
)
from .frames.model import NormalizedSchema
from .runtime.generate import GenerationResult, GenerationStats, generate
from .hf import ToolCallLogitsProcessor, ToolCallStoppingCriteria
from .runtime.models import LoadedModel, load_model
from .options import CompileOptions
from .output.parse import ParseResult, RejectedCall, parse_tool_calls
from .output.render import render_tool_calls
from .output.repair import RepairResult, repair_arguments
from .schema.annotate import annotate_ref_types
from .frames.normalize import normalize_schema
from .frames.toolset import (
    LeftOutTool,
    NormalizedTool,
    ToolSet,
    normalize_tool,
    normalize_tool_set,
    normalize_tools,
)
from .frames.types import effective_type, json_types
from .output.stream import ToolCallStreamParser
from .tokenizers import Tokenizer, TokenizerError, load_tokenizer
from .tools import Tool, load_tool_entries, load_tools, load_tools_file

__version__ = _version("constrained")

__all__ = [
    "DIALECTS",
    "ArgumentError",
    "CheckResult",
    "CompileError",
    "CompileOptions",
    "CompiledTools",
    "ConstrainedError",
    "ConstraintError",
    "ConstraintEvent",
    "GenerationError",
    "GenerationResult",
    "GenerationStats",
    "LeftOutTool",
    "LoadedModel",
    "NormalizedSchema",
    "NormalizedTool",
    "OptionError",
    "StreamClosedError",
    "ParseResult",
    "RejectedCall",
    "RepairResult",
    "RowState",
    "SchemaError",
    "SchemaLimitError",
    "SchemaWarning",
    "Tokenizer",
    "TokenizerError",
    "Tool",
    "ToolCallConstraint",
    "ToolCallLogitsProcessor",
    "ToolCallStoppingCriteria",
    "ToolCallStreamParser",
    "ToolDefinitionError",
    "ToolSet",
    "UnknownDialectError",
    "UnsatisfiableSchemaError",
    "annotate_ref_types",
    "compile_tools",
    "effective_type",
    "fill_masks_together",
    "generate",
    "json_types",
    "load_model",
    "load_tokenizer",
    "load_tool_entries",
    "load_tools",
    "load_tools_file",
    "normalize_schema",
    "normalize_tool",
    "normalize_tool_set",
    "normalize_tools",
    "parse_tool_calls",
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
