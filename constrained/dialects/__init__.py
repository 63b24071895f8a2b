"""The tool-call dialects, by name (:mod:`.registry` finds them)."""

from __future__ import annotations

from .registry import DIALECTS, get_dialect

__all__ = ["DIALECTS", "get_dialect"]
