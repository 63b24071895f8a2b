"""Tools -> one llguidance grammar in a dialect's syntax: ``compile_tools``.

The grammar is the dialect's fixed ``.lark`` parts, the rules emitted from
each tool's frames, and a start rule for the requested ``tool_choice``.
Compiling is deterministic, so the result is cached by a fingerprint of the
dialect, the normalized tools, the options and the tokenizer's vocabulary.
"""

from __future__ import annotations

import json
from dataclasses import asdict, astuple, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from .caches import LruCache
from .dialects import get_dialect
from .dialects.base import Dialect, Markers
from .dialects.turn_rules import check_markers, turn_rules
from .dialects.writable import writable_tool_set
from .errors import CompileError, OptionError, SchemaWarning
from .frames.model import canonical_json
from .frames.toolset import (
    LeftOutTool,
    NormalizedTool,
    ToolSet,
    clear_normalize_cache,
    normalize_tool,
    normalize_tool_set,
)
from .grammar.emitter import ValueEmitter
from .grammar.lark import RuleSet
from .options import TOOL_CHOICES, BadTools, CompileOptions, KeyOrder, Reasoning, ToolChoice
from .schema.json_values import json_text, text_digest
from .schema.limits import too_deep
from .tokenizers import Tokenizer, load_tokenizer
from .tools import Tool

FORMAT_VERSION = 2


@dataclass(frozen=True)
class ToolWarning:
    """A relaxation, with the tool it belongs to."""

    tool: str
    warning: SchemaWarning

    def __str__(self) -> str:
        return f"tool {self.tool!r}: {self.warning}"


@dataclass(frozen=True)
class CheckResult:
    """Whether a model output is one the constraint accepts, and if not,
    where the first rejected token starts and what the constraint allowed
    there: how many tokens, and which of them are special tokens (the
    markers, such as ``</think>`` or the end of the turn)."""

    accepted: bool
    token_index: int | None = None
    byte_offset: int | None = None
    allowed_tokens: int | None = None
    allowed_markers: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        if self.accepted:
            return {"accepted": True}
        return {
            "accepted": False,
            "token_index": self.token_index,
            "byte_offset": self.byte_offset,
            "allowed_tokens": self.allowed_tokens,
            "allowed_markers": list(self.allowed_markers),
        }


@dataclass(frozen=True)
class CompiledTools:
    """A compiled tool set: the grammar, the normalized tools it was made
    from, every relaxation, and the options. ``fingerprint`` identifies it."""

    grammar: str
    tools: tuple[NormalizedTool, ...]
    warnings: tuple[ToolWarning, ...]
    dialect: str
    options: CompileOptions
    fingerprint: str
    tokenizer: Tokenizer = field(repr=False, compare=False)
    left_out: tuple[LeftOutTool, ...] = ()
    """Tools of the set that are not in the grammar, each with the JSON
    Pointer and the reason (also in :attr:`warnings`); a call of one is an
    error in the parser's ``errors``."""
    _template: Any = field(default=None, init=False, repr=False, compare=False)
    _variants: dict[Any, CompiledTools] = field(default_factory=dict, init=False, repr=False, compare=False)
    """The same set compiled with another reasoning (:meth:`after_prompt`)."""
    _masks: Any = field(default=None, init=False, repr=False, compare=False)
    """The masks computed so far for this set, shared by every constraint
    made from it (:mod:`constrained.runtime.mask_cache`)."""

    @property
    def tool_choice(self) -> str:
        return self.options.tool_choice

    @property
    def parallel_tool_calls(self) -> bool:
        return self.options.parallel_tool_calls

    @property
    def key_order(self) -> str:
        return self.options.key_order

    @property
    def reasoning(self) -> Reasoning:
        return self.options.reasoning

    @property
    def tool_set(self) -> ToolSet:
        """The compiled tools and the ones left out, as the parser reads them."""
        return ToolSet(self.tools, self.left_out)

    def matcher(self) -> Any:
        """A fresh ``llguidance.LLMatcher`` for one sequence: a copy of one
        matcher built once per compiled grammar (building is the costly part)."""
        if self._template is None:
            import llguidance

            template = llguidance.LLMatcher(self.tokenizer.ll_tokenizer, self.grammar, log_level=0)
            if template.is_error():
                raise CompileError(f"llguidance rejected the grammar: {template.get_error()}")
            object.__setattr__(self, "_template", template)
        return self._template.deep_copy()

    def check(self, text: str) -> CheckResult:
        """Whether ``text`` (what a model generates, without its final
        end-of-generation token) is a complete output the constraint allows:
        every token allowed, and a turn end allowed after the last one."""
        tokens = self.tokenizer.encode(text)
        matcher = self.matcher()
        valid = matcher.validate_tokens(tokens)
        matcher.consume_tokens(tokens[:valid])
        if valid < len(tokens):
            offset = sum(len(self.tokenizer.token_bytes(token)) for token in tokens[:valid])
            return CheckResult(False, valid, offset, *self._allowed(matcher))
        for marker in self._end_markers():
            end = self.tokenizer.token_id(marker)
            # validate_tokens() never passes an end-of-sequence token; a trial
            # consume on a copy does.
            trial = matcher.deep_copy()
            if end is not None and trial.consume_token(end) and not trial.is_error():
                return CheckResult(True)
        offset = len(text.encode("utf-8"))
        return CheckResult(False, len(tokens), offset, *self._allowed(matcher))

    def _allowed(self, matcher: Any) -> tuple[int, tuple[str, ...]]:
        """How many tokens ``matcher`` allows next, and the special ones."""
        import numpy as np

        words = np.frombuffer(matcher.compute_bitmask(), dtype=np.uint32)
        allowed = np.flatnonzero(np.unpackbits(words.view(np.uint8), bitorder="little"))
        allowed = allowed[allowed < self.tokenizer.vocab_size]
        markers = tuple(self.tokenizer.decode([int(t)]) for t in allowed if self.tokenizer.is_special(int(t)))
        return len(allowed), markers

    def after_prompt(self, prompt: str) -> CompiledTools:
        """This set as the output of ``prompt`` needs it: compiled again
        (cached) with the reasoning the prompt's tail says
        (:meth:`Dialect.prompt_reasoning`) where that differs from its own:
        ``"open"`` when the prompt ends inside a reasoning block, ``True``
        instead of ``"open"`` when it ends after one. The tail is the truth
        the model continues from; a grammar that disagrees cannot be met."""
        state = get_dialect(self.dialect).prompt_reasoning(prompt)
        if state == "open":
            reasoning: Reasoning = "open"
        elif state is False and self.reasoning == "open":
            reasoning = True
        else:
            return self
        if reasoning == self.reasoning:
            return self
        # At most three variants; dict.get and setdefault are atomic, so racing threads keep one.
        variant = self._variants.get(reasoning)
        if variant is None:
            recompiled = compile_tools(
                self.tools, self.dialect, self.tokenizer, options=replace(self.options, reasoning=reasoning)
            )
            variant = replace(recompiled, left_out=self.left_out, warnings=self.warnings)
            variant = self._variants.setdefault(reasoning, variant)
        return variant

    def _end_markers(self) -> tuple[str, ...]:
        dialect = get_dialect(self.dialect)
        return tuple(dict.fromkeys(dialect.markup.turn_ends + dialect.markup.ends_after_calls))

    def save(self, path: str | Path) -> None:
        """Write the compiled artifact as JSON (the tokenizer is referenced by
        its fingerprint and supplied again to :meth:`load`)."""
        data = {
            "format": FORMAT_VERSION,
            "grammar": self.grammar,
            "dialect": self.dialect,
            **asdict(self.options),
            "fingerprint": self.fingerprint,
            "tokenizer_fingerprint": self.tokenizer.fingerprint,
            "tools": [
                {"name": t.name, "description": t.description, "parameters": t.parameters, "strict": t.strict}
                for t in self.tools
            ],
            "warnings": [{"tool": w.tool, **w.warning.__dict__} for w in self.warnings],
            "left_out": [{"name": t.name, "path": t.path, "reason": t.reason} for t in self.left_out],
        }
        Path(path).write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path, tokenizer: Tokenizer | str) -> CompiledTools:
        """Read an artifact written by :meth:`save`; ``tokenizer`` must have
        the vocabulary it was compiled for."""
        tok = tokenizer if isinstance(tokenizer, Tokenizer) else load_tokenizer(tokenizer)
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if data.get("format") != FORMAT_VERSION:
            raise CompileError(f"{path}: not a compiled tools file of format {FORMAT_VERSION}")
        if data["tokenizer_fingerprint"] != tok.fingerprint:
            raise CompileError(
                f"{path} was compiled for another vocabulary than tokenizer {tok.name!r}; compile it again"
            )
        # The frames follow from the parameters and the object policy.
        tools = tuple(
            normalize_tool(Tool(t["name"], t["description"], t["parameters"], "function"), strict=t["strict"])
            for t in data["tools"]
        )
        warnings = tuple(
            ToolWarning(w["tool"], SchemaWarning(w["path"], w["keyword"], w["message"])) for w in data["warnings"]
        )
        # Artifacts written before an option was saved hold its default (strict: as their tools were read).
        saved = {"strict": all(t.strict for t in tools), **data}
        options = CompileOptions(**{name: saved[name] for name in _OPTION_NAMES if name in saved})
        return cls(
            grammar=data["grammar"],
            tools=tools,
            warnings=warnings,
            dialect=data["dialect"],
            options=options,
            fingerprint=data["fingerprint"],
            tokenizer=tok,
            left_out=tuple(LeftOutTool(t["name"], t["reason"], t["path"]) for t in data.get("left_out", [])),
        )


_OPTION_NAMES = tuple(option.name for option in fields(CompileOptions))
_cache: LruCache[str, CompiledTools] = LruCache("compiled tool sets", 64)
"""Compiled sets by fingerprint and by the digest of the JSON they were given."""
_by_objects: LruCache[tuple[Any, ...], tuple[tuple[Any, ...], CompiledTools]] = LruCache(
    "compiled tool sets by tool objects", 64
)
"""Compiled sets by the identity of the tool objects they were given."""


def compile_tools(
    tools: Any,
    dialect: str,
    tokenizer: Tokenizer | str,
    tool_choice: ToolChoice = "auto",
    parallel_tool_calls: bool = True,
    key_order: KeyOrder = "trained",
    *,
    strict: bool = True,
    reasoning: Reasoning = True,
    bad_tools: BadTools = "leave_out",
    options: CompileOptions | None = None,
) -> CompiledTools:
    """Compile ``tools`` (any form :func:`load_tools` accepts, or
    :class:`NormalizedTool` objects) into a constraint in ``dialect``'s syntax.

    The options (``tool_choice``, ``parallel_tool_calls``, ``key_order``,
    ``strict``, ``reasoning``, ``bad_tools``: see :class:`CompileOptions`)
    are given as keyword arguments or as one ``options`` object, not both.

    ``bad_tools="leave_out"`` (the default): a tool that cannot be read
    (malformed, unsatisfiable, past a limit, a bad definition, a name used
    twice) or written in the dialect is left out of the grammar, listed in
    :attr:`CompiledTools.left_out` and :attr:`CompiledTools.warnings`, and the
    others compile. Only when tools were given and none is left does
    compiling fail: with that tool's own error when one was given, else a
    :class:`CompileError` listing each; and when ``tool_choice`` names a tool
    left out. ``"raise"``: the first such tool's error is raised.
    """
    keywords = CompileOptions(
        tool_choice=tool_choice,
        parallel_tool_calls=parallel_tool_calls,
        key_order=key_order,
        strict=strict,
        reasoning=reasoning,
        bad_tools=bad_tools,
    )
    options = CompileOptions.resolve(options, keywords)
    chosen = get_dialect(dialect)
    tok = tokenizer if isinstance(tokenizer, Tokenizer) else load_tokenizer(tokenizer)
    settings = (chosen.name, *astuple(options), tok.fingerprint)
    object_key = _object_key(tools, settings)
    same_objects = _same_objects(object_key, tools)
    if same_objects is not None:
        return same_objects
    source = _source_key(tools, settings)
    cached = _cache.get(source) if source is not None else None
    if cached is not None:
        _remember_objects(object_key, tools, cached)
        return cached
    tool_set = normalize_tool_set(tools, strict=options.strict)
    if options.bad_tools == "raise":
        tool_set.raise_first()
    key = _fingerprint(chosen.name, tool_set, options, tok)
    compiled = _cache.get_or_make(key, lambda: _compile(chosen, tool_set, tok, options, key))
    if source is not None:
        _cache.put(source, compiled)
    _remember_objects(object_key, tools, compiled)
    return compiled


def clear_compile_cache() -> None:
    """Forget every compiled set and every normalized one (e.g. to time a
    cold compile, which normalizes the tools first)."""
    _cache.clear()
    _by_objects.clear()
    clear_normalize_cache()


def _object_key(tools: Any, settings: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """A key from the identity of tools given as loaded tool objects (frozen,
    so the same objects are the same tools): a repeated compile of them
    skips writing their schemas out for a content key (about 1 ms for 100
    tools). ``None`` for other forms."""
    if not isinstance(tools, (list, tuple)) or not tools:
        return None
    if not all(isinstance(tool, (Tool, NormalizedTool)) for tool in tools):
        return None
    return (*settings, *map(id, tools))


def _same_objects(key: tuple[Any, ...] | None, tools: Any) -> CompiledTools | None:
    if key is None:
        return None
    found = _by_objects.get(key)
    # The entry holds the objects, so an id in its key cannot be reused while it lives.
    if found is None or any(a is not b for a, b in zip(found[0], tools)):
        return None
    return found[1]


def _remember_objects(key: tuple[Any, ...] | None, tools: Any, compiled: CompiledTools) -> None:
    if key is None:
        return
    _by_objects.put(key, (tuple(tools), compiled))


def _source_key(tools: Any, options: tuple[Any, ...]) -> str | None:
    """A cache key from the tools exactly as given, when they are plain JSON
    (a list of tool dicts, as a server receives them): a repeated request
    then skips normalization, which is most of a cached compile (about 13 ms
    for 100 tools, against 0.7 ms for this key). ``None`` for other forms,
    and for tools nested too deep to write (loading them says why)."""
    text = json_text([tools, options]) if isinstance(tools, (list, tuple, dict)) else None
    return None if text is None else "source:" + text_digest(text)


def _check_tool_choice(tool_set: ToolSet, tool_choice: str, given: int) -> None:
    """``tool_choice`` names a mode or a compiled tool, and some tool is
    left to call when tools were given (``given`` of them)."""
    names = [tool.name for tool in tool_set.tools]
    left_out = tool_set.left_out_by_name()
    if tool_choice in left_out:
        raise OptionError(
            f"tool_choice names tool {tool_choice!r}, which was left out: {left_out[tool_choice].reason}",
            argument="tool_choice",
        )
    if tool_choice not in TOOL_CHOICES and tool_choice not in names:
        raise OptionError(
            f"tool_choice {tool_choice!r} is neither one of {', '.join(TOOL_CHOICES)} nor a tool name "
            f"(tools: {', '.join(names) or 'none'})",
            argument="tool_choice",
        )
    if given and not names:
        if given == 1:
            tool_set.raise_first()
        reasons = "; ".join(str(tool) for tool in tool_set.left_out)
        raise CompileError(f"none of the {given} tools can be compiled: {reasons}")
    if tool_choice == "required" and not names:
        raise OptionError(
            'tool_choice="required" needs at least one tool, but the tool list is empty', argument="tool_choice"
        )


def _fingerprint(dialect: str, tool_set: ToolSet, options: CompileOptions, tok: Tokenizer) -> str:
    # ``strict`` is in each tool's entry; the list keeps the order of artifacts already written.
    chosen = [options.tool_choice, options.parallel_tool_calls, options.key_order, options.reasoning, options.bad_tools]
    material = {
        "format": FORMAT_VERSION,
        "dialect": dialect,
        "tools": [[t.name, t.description, t.parameters, t.strict] for t in tool_set.tools],
        "left_out": [[t.name, t.path, t.reason] for t in tool_set.left_out],
        "options": chosen,
        "tokenizer": tok.fingerprint,
    }
    return text_digest(canonical_json(material))


def _compile(
    dialect: Dialect, tool_set: ToolSet, tok: Tokenizer, options: CompileOptions, fingerprint: str
) -> CompiledTools:
    check_markers(dialect, Markers(tok))
    given = len(tool_set.tools) + len(tool_set.left_out)
    tool_set = writable_tool_set(dialect, tool_set, tok)
    tool_choice = options.tool_choice
    order = dialect.chat.trained_key_order if options.key_order == "trained" else options.key_order
    markers = Markers(tok)
    rules = RuleSet()
    warnings: list[ToolWarning] = []
    bodies = []
    compiled_tools: list[NormalizedTool] = []
    left_out = list(tool_set.left_out)
    for tool in tool_set.tools:
        emitter = ValueEmitter(rules, dialect.values_syntax(markers), tool.schema.definitions, key_order=order, tool=tool.name)
        try:
            body = dialect.call_body(tool, emitter, markers) if tool_choice in (*TOOL_CHOICES, tool.name) else None
        except RecursionError:
            left_out.append(LeftOutTool.from_error(tool.name, too_deep(tool.name)))
            continue
        compiled_tools.append(tool)
        warnings.extend(ToolWarning(tool.name, w) for w in tool.warnings)
        if body is not None:
            bodies.append(body)
            warnings.extend(ToolWarning(tool.name, w) for w in emitter.warnings)
    tool_set = ToolSet(tuple(compiled_tools), tuple(left_out))
    if options.bad_tools == "raise":
        tool_set.raise_first()
    _check_tool_choice(tool_set, tool_choice, given)
    warnings.extend(ToolWarning(tool.name, tool.warning) for tool in tool_set.left_out)
    grammar = "\n".join(
        [
            dialect.grammar(),
            "// -- generated --",
            *turn_rules(dialect, markers, options, bool(bodies)),
            f"tool_body: {' | '.join(f'({b})' for b in bodies)}" if bodies else "",
            rules.text(),
        ]
    )
    compiled = CompiledTools(
        grammar=grammar,
        tools=tool_set.tools,
        warnings=tuple(warnings),
        dialect=dialect.name,
        options=options,
        fingerprint=fingerprint,
        tokenizer=tok,
        left_out=tool_set.left_out,
    )
    compiled.matcher()
    return compiled
