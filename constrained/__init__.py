"""constrained: tool calls that come out right at generation time.

Tool schemas are read once, faithfully, into typed frames; the grammar
emitters, the logits mask and the parser all work from that one reading.
"""

from .errors import (
    ConstrainedError,
    SchemaError,
    ToolDefinitionError,
    UnsatisfiableSchemaError,
)
from .frames import NormalizedSchema, SchemaWarning
from .schema.annotate import annotate_ref_types
from .schema.normalize import normalize_schema
from .schema.tool import NormalizedTool, normalize_tool, normalize_tools
from .schema.types import effective_type, json_types
from .tools import Tool, load_tools, load_tools_file

__all__ = [
    "ConstrainedError",
    "NormalizedSchema",
    "NormalizedTool",
    "SchemaError",
    "SchemaWarning",
    "Tool",
    "ToolDefinitionError",
    "UnsatisfiableSchemaError",
    "annotate_ref_types",
    "effective_type",
    "json_types",
    "load_tools",
    "load_tools_file",
    "normalize_schema",
    "normalize_tool",
    "normalize_tools",
]
