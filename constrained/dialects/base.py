"""What a dialect is: the bytes a model family writes for tool calls.

A dialect module supplies the grammar file with its fixed parts, the special
tokens it relies on, how one call of a tool is written (as Lark, from the
tool's frames) and how a call is rendered as text. The compiler does the rest
(tool_choice, parallel calls, caching), so a new dialect is one module plus
one ``.lark`` file.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from importlib import resources
from typing import Any, ClassVar

from ..frames import ObjectFrame, UnionFrame
from ..grammar.lark import literal
from ..grammar.values import ValueEmitter, ValueSyntax
from ..schema.tool import NormalizedTool
from ..tokenizers import Tokenizer


class Markers:
    """How a marker is written in the grammar for one tokenizer: as its
    special token when the vocabulary has one, else as plain text."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer

    def is_token(self, marker: str) -> bool:
        token = self.tokenizer.token_id(marker)
        return token is not None and self.tokenizer.is_special(token)

    def __call__(self, marker: str) -> str:
        return marker if self.is_token(marker) else literal(marker)


class Dialect(ABC):
    """One tool-call syntax."""

    name: ClassVar[str]
    value_syntax: ClassVar[ValueSyntax]
    trained_key_order: ClassVar[str]
    """Key order the family's chat template renders: "schema" or "alphabetical"."""
    required_tokens: ClassVar[tuple[str, ...]]
    """Markers that must be single tokens of the tokenizer."""
    end_tokens: ClassVar[tuple[str, ...]]
    """Markers that end a turn of text; those the tokenizer has are allowed
    (at least one must exist)."""
    call_end_tokens: ClassVar[tuple[str, ...]]
    """Markers that end a turn after tool calls, likewise."""
    reasoning_tokens: ClassVar[tuple[str, ...]] = ()
    """Markers of the reasoning block (rule ``reasoning``); without them in
    the vocabulary the block is left out."""
    call_separator: ClassVar[bool] = True
    """Whether calls are separated (rule ``call_separator``) or adjacent."""

    def grammar(self) -> str:
        """The fixed parts: ``grammars/<name>.lark``."""
        return resources.files("constrained.grammars").joinpath(f"{self.name}.lark").read_text(encoding="utf-8")

    @abstractmethod
    def call_body(self, tool: NormalizedTool, emitter: ValueEmitter, markers: Markers) -> str:
        """Lark for one call of ``tool`` between the fixed call markers."""

    @abstractmethod
    def render_call(self, tool: NormalizedTool, arguments: dict[str, Any], key_order: str) -> str:
        """The text of one call, as the family's chat template writes it."""

    @staticmethod
    def argument_objects(tool: NormalizedTool) -> tuple[ObjectFrame, ...]:
        """The object frames a call's arguments may take (several when the
        parameters are a union of parameter sets)."""
        root = tool.schema.resolve(tool.root)
        options = root.options if isinstance(root, UnionFrame) else (root,)
        objects = tuple(tool.schema.resolve(option) for option in options)
        assert all(isinstance(o, ObjectFrame) for o in objects), "normalize_tool guarantees object parameters"
        return objects  # type: ignore[return-value]

    def ordered(self, arguments: dict[str, Any], tool: NormalizedTool, key_order: str) -> list[str]:
        """Argument names in the order the grammar expects them."""
        order = self.trained_key_order if key_order in ("trained", "any") else key_order
        if order == "alphabetical":
            return sorted(arguments)
        root = tool.schema.resolve(tool.root)
        declared = [name for name, _ in getattr(root, "properties", ())]
        return [k for k in declared if k in arguments] + [k for k in arguments if k not in declared]
