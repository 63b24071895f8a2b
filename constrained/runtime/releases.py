"""The releases of a serving engine a plug-in supports, checked when the
plug-in is imported.

Each engine release may move the internal classes a plug-in builds on, and
an engine's plug-in loader tends to turn a failed import into a log line
and, later, an unrelated error. So each plug-in names the releases it has
been checked against (:class:`SupportedReleases`) and refuses any other
with one line that says what to do, or only warns where the user asked to
load it anyway.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from ..errors import EngineVersionError


@dataclass(frozen=True)
class SupportedReleases:
    """The releases of ``engine`` (pip package ``package``) that ``plugin``
    supports: from ``first`` to ``last``, both included, each compared on
    as many parts as it has (``(0, 32)`` to ``(0, 34)``: every 0.32, 0.33
    and 0.34 release; ``(0, 5, 23)`` to ``(0, 5, 23)``: 0.5.23 alone).
    ``unchecked_variable=1`` loads the plug-in beside another release with a
    warning; ``docs`` is where checking a new release is written down."""

    engine: str
    package: str
    plugin: str
    first: tuple[int, ...]
    last: tuple[int, ...]
    unchecked_variable: str
    docs: str

    def range(self) -> str:
        """The releases as people write them: ``0.32 to 0.34``, ``0.5.23``."""
        first, last = _dotted(self.first), _dotted(self.last)
        return first if first == last else f"{first} to {last}"

    def requirement(self) -> str:
        """The releases as a pip requirement: ``vllm>=0.32,<0.35``."""
        following = (*self.last[:-1], self.last[-1] + 1)
        return f"{self.package}>={_dotted(self.first)},<{_dotted(following)}"

    def is_supported(self, version: str) -> bool:
        """Whether ``version`` (the engine's ``__version__``: ``0.34.0``,
        ``0.32.0+cpu``, ``0.34.1.dev3``) is one of the releases."""
        try:
            release = Version(version).release
        except InvalidVersion:
            return False
        return self.first <= release[: len(self.first)] and release[: len(self.last)] <= self.last

    def check(self, version: str) -> None:
        """Raise :class:`~constrained.errors.EngineVersionError` for a
        release outside the range, or only warn when
        :attr:`unchecked_variable` is set to 1."""
        if self.is_supported(version):
            return
        found = f"this is {self.engine} {version}"
        if os.environ.get(self.unchecked_variable, "").strip() == "1":
            warnings.warn(
                f"{self.plugin} is checked against {self.engine} {self.range()} and {found}; loading it anyway "
                f"({self.unchecked_variable}=1)",
                RuntimeWarning,
                stacklevel=2,
            )
            return
        raise EngineVersionError(
            f"{self.plugin} supports {self.engine} {self.range()} and {found}: install one of those "
            f"(pip install '{self.requirement()}'), or set {self.unchecked_variable}=1 to load the plug-in anyway "
            f"({self.docs})",
            engine=self.package,
            version=version,
            supported=self.range(),
        )


def _dotted(release: tuple[int, ...]) -> str:
    return ".".join(str(part) for part in release)
