"""The tool-call dialects, by name."""

from __future__ import annotations

from ..errors import UnknownDialectError
from .base import Dialect
from .gemma import FunctionGemma, Gemma4
from .glm import Glm45, Glm47
from .hermes import Hermes
from .qwen3_coder import Qwen3Coder

DIALECTS: dict[str, Dialect] = {
    dialect.name: dialect for dialect in (Qwen3Coder(), Gemma4(), FunctionGemma(), Hermes(), Glm45(), Glm47())
}


def get_dialect(name: str) -> Dialect:
    """The dialect called ``name`` (:class:`UnknownDialectError` lists the known ones)."""
    try:
        return DIALECTS[name]
    except KeyError:
        raise UnknownDialectError(
            f"unknown dialect {name!r}; expected one of {', '.join(sorted(DIALECTS))}"
        ) from None
