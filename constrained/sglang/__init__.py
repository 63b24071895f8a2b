"""``constrained`` as an SGLang plug-in.

Installing ``constrained`` beside SGLang registers the plug-in (an entry
point in SGLang's ``sglang.srt.plugins`` group, which every SGLang process
loads); start the server with::

    --tool-call-parser constrained_gemma4 --grammar-backend constrained

The detectors (``constrained_<dialect>``, one per dialect) read outputs
with the library's schema-aware parser and ask for the library's
constraint for every request with tools, in ``auto`` as well as
``required`` and named choices; the grammar backend compiles it and masks
those requests, and hands every other grammar to XGrammar (or llguidance:
:data:`~constrained.sglang.grammar_backend.OTHER_GRAMMARS_VARIABLE`).
The plug-in supports the SGLang releases in :data:`RELEASES` (any other is
refused with one line, which SGLang logs).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from ..runtime.releases import SupportedReleases

RELEASES = SupportedReleases(
    engine="SGLang",
    package="sglang",
    plugin="constrained.sglang",
    first=(0, 5, 23),
    last=(0, 5, 23),
    unchecked_variable="CONSTRAINED_SGLANG_UNCHECKED",
    docs="docs/sglang.md, 'A new SGLang release'",
)
"""The SGLang releases the plug-in is checked against."""

try:
    RELEASES.check(version("sglang"))
except PackageNotFoundError as e:
    raise ImportError(
        "constrained.sglang needs SGLang (pip install 'constrained[sglang]'; docs/sglang.md)"
    ) from e

try:
    from .detectors import ConstrainedDetector, ToolsTag, register_detectors
    from .grammar_backend import BACKEND_NAME, ConstrainedGrammarBackend, ToolCallGrammar, create_backend
except ModuleNotFoundError as e:
    raise ImportError(
        f"constrained.sglang cannot load beside SGLang {version('sglang')}: no module named {e.name!r} "
        f"({RELEASES.docs})"
    ) from e


def register() -> None:
    """The entry point SGLang runs in each of its processes: the detectors
    ``constrained_<dialect>`` and the grammar backend ``constrained``."""
    from sglang.srt.constrained.base_grammar_backend import GRAMMAR_BACKEND_REGISTRY, register_grammar_backend
    from sglang.srt.server_args import GRAMMAR_BACKEND_CHOICES, add_grammar_backend_choices

    register_detectors()
    if BACKEND_NAME not in GRAMMAR_BACKEND_REGISTRY:
        register_grammar_backend(BACKEND_NAME, create_backend)
    if BACKEND_NAME not in GRAMMAR_BACKEND_CHOICES:
        add_grammar_backend_choices([BACKEND_NAME])


__all__ = [
    "RELEASES",
    "ConstrainedDetector",
    "ConstrainedGrammarBackend",
    "ToolCallGrammar",
    "ToolsTag",
    "register",
    "register_detectors",
]
