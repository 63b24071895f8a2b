"""The options of a compiled constraint, in one frozen object.

:class:`CompileOptions` is what ``compile_tools`` is asked for; ``generate``,
the fuzzer and the command line build or read that same object instead of
copying its fields, and the compile cache key and fingerprint are made from
it. Each value is checked once, when the object is made.

Each field also says how the command line spells it (a :class:`Flag`), so
the CLI declares its flags from the fields (:func:`add_flags`, read back by
:func:`options_from`) and a fuzz replay writes them
back the same way.
"""

from __future__ import annotations

import argparse
import functools
import shlex
from dataclasses import Field, dataclass, field, fields
from typing import Any, Literal, TypeVar, get_args

from .errors import OptionError

ToolChoiceMode = Literal["auto", "required", "none"]
ToolChoice = ToolChoiceMode | str
"""A mode, or the name of the one tool to call."""
KeyOrder = Literal["trained", "schema", "alphabetical", "any"]
BadTools = Literal["leave_out", "raise"]
Reasoning = bool | Literal["open"]
"""``True``: the model may open a reasoning block; ``False``: it writes none;
``"open"``: the prompt opened one, so the output starts inside it."""

TOOL_CHOICES: tuple[str, ...] = get_args(ToolChoiceMode)
KEY_ORDERS: tuple[str, ...] = get_args(KeyOrder)
BAD_TOOLS: tuple[str, ...] = get_args(BadTools)


@dataclass(frozen=True)
class Flag:
    """How the command line spells an option. A boolean option's flag sets
    the opposite of its default (``--no-parallel``); any other takes a value,
    and its ``help`` leaves the default out (the command line adds it).
    ``always``: a command line written from options shows this one at its
    default too (so that a replay reads in full)."""

    name: str
    help: str
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    always: bool = False
    values: dict[str, Any] | None = None
    """The option's values by their command-line spelling, where they are
    not strings (``--reasoning on``)."""

    def spell(self, value: Any) -> str:
        """``value`` as the command line writes it."""
        if self.values is not None:
            return next(word for word, known in self.values.items() if known == value)
        return str(value)


def option(default: Any, flag: Flag) -> Any:
    """A dataclass field with ``default``, spelled ``flag`` on the command line."""
    return field(default=default, metadata={"flag": flag})


def flag_of(option_field: Field[Any]) -> Flag:
    """The :class:`Flag` of an options dataclass's field."""
    flag: Flag = option_field.metadata["flag"]
    return flag


def command_line(options: Any) -> str:
    """The flags that give ``options`` (a dataclass of :func:`option` fields):
    those off their default, and those marked ``always``."""
    words: list[str] = []
    for option_field in fields(options):
        flag, value = flag_of(option_field), getattr(options, option_field.name)
        if isinstance(option_field.default, bool) and flag.values is None:
            words += [flag.name] if value != option_field.default else []
        elif value != option_field.default or flag.always:
            words += [flag.name, shlex.quote(flag.spell(value))]
    return " ".join(words)


REASONING_VALUES: dict[str, Reasoning] = {"on": True, "off": False, "open": "open"}


def check_reasoning(value: Any) -> None:
    """Raise :class:`OptionError` unless ``value`` is a :data:`Reasoning`."""
    if not (value is True or value is False or value == "open"):
        raise OptionError(f'reasoning must be True, False or "open", got {value!r}', argument="reasoning")


@dataclass(frozen=True)
class CompileOptions:
    """How a tool set is compiled.

    ``tool_choice``: ``"auto"`` (text, then optionally calls), ``"required"``
    (at least one call), ``"none"`` (text only), or a tool's name (a call of
    that tool). ``parallel_tool_calls=False`` allows one call. ``key_order``:
    ``"trained"`` (the family's habit), ``"schema"``, ``"alphabetical"`` or
    ``"any"`` (any order, every required key, no repeats; exact up to 8
    keys). ``strict=False`` follows JSON Schema literally (an object without
    ``additionalProperties`` stays open). ``reasoning``: ``True`` lets the
    model open the dialect's reasoning block before anything else, ``False``
    leaves the block out (a model whose thinking is off), ``"open"`` says
    the prompt opened it (the template of a thinking model ends the prompt
    with ``<think>``): the output starts inside the block, and only its
    closing leads out, to text or calls as ``tool_choice`` says.
    ``bad_tools``: ``"leave_out"`` a tool that cannot be compiled, or
    ``"raise"`` its error.
    """

    tool_choice: ToolChoice = option(
        "auto", Flag("--tool-choice", f"{', '.join(TOOL_CHOICES)}, or a tool name", always=True)
    )
    parallel_tool_calls: bool = option(True, Flag("--no-parallel", "allow one call only"))
    key_order: KeyOrder = option(
        "trained", Flag("--key-order", "order of an object's keys; trained is the family's habit", KEY_ORDERS)
    )
    strict: bool = option(
        True, Flag("--loose", "follow JSON Schema literally: objects without additionalProperties stay open")
    )
    reasoning: Reasoning = option(
        True,
        Flag(
            "--reasoning",
            "on: the model may open a reasoning block; off: no block; "
            "open: the prompt opened it, the output starts inside it",
            values=REASONING_VALUES,
        ),
    )
    bad_tools: BadTools = option(
        "leave_out", Flag("--bad-tools", "leave out a tool that cannot be compiled, or raise", BAD_TOOLS)
    )

    def __post_init__(self) -> None:
        if not isinstance(self.tool_choice, str) or not self.tool_choice:
            raise OptionError(
                f"tool_choice must be one of {', '.join(TOOL_CHOICES)} or a tool's name, got {self.tool_choice!r}",
                argument="tool_choice",
            )
        for name in ("parallel_tool_calls", "strict"):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise OptionError(f"{name} must be True or False, got {value!r}", argument=name)
        check_reasoning(self.reasoning)
        _check_choice("key_order", self.key_order, KEY_ORDERS)
        _check_choice("bad_tools", self.bad_tools, BAD_TOOLS)

    @classmethod
    def resolve(cls, options: CompileOptions | None, keywords: CompileOptions) -> CompileOptions:
        """``options`` when given, else ``keywords`` (the options a function's
        keyword arguments make). Both, with a keyword off its default, is an
        error: one of them would be ignored."""
        if options is None:
            return keywords
        if keywords != cls():
            raise OptionError("give the options either as keyword arguments or as options=, not both", argument="options")
        return options


def _check_choice(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise OptionError(f"unknown {name} {value!r}; expected one of {', '.join(allowed)}", argument=name)


OptionsT = TypeVar("OptionsT")
"""An options dataclass whose fields carry :class:`Flag` metadata (mypy
has no bound for "a dataclass type", hence the ignore where fields are read)."""


def add_flags(parser: argparse.ArgumentParser, options_type: type, *names: str) -> None:
    """One flag per field of ``options_type`` (those in ``names``, else
    all), as its :class:`~constrained.options.Flag` spells it; the parsed
    value lands under the field's name (see :func:`options_from`). A value
    flag's default is its command-line spelling (``--reasoning on``), which
    argparse converts like a value given."""
    for option_field in fields(options_type):
        if names and option_field.name not in names:
            continue
        flag, default = flag_of(option_field), option_field.default
        if isinstance(default, bool) and flag.values is None:
            action = "store_false" if default else "store_true"
            parser.add_argument(flag.name, dest=option_field.name, action=action, help=flag.help)
            continue
        parser.add_argument(
            flag.name,
            dest=option_field.name,
            type=functools.partial(_spelled, flag.values) if flag.values is not None else type(default),
            default=flag.spell(default) if flag.values is not None else default,
            choices=flag.choices,
            metavar="{" + ",".join(flag.values) + "}" if flag.values is not None else flag.metavar,
            help=f"{flag.help} (default: %(default)s)",
        )


def _spelled(values: dict[str, Any], word: str) -> Any:
    """The option value the command line spells ``word``."""
    if word not in values:
        raise argparse.ArgumentTypeError(f"expected one of {', '.join(values)}, got {word!r}")
    return values[word]


def options_from(args: argparse.Namespace, options_type: type[OptionsT]) -> OptionsT:
    """The options object of ``options_type`` the flags of :func:`add_flags` made."""
    return options_type(**{f.name: getattr(args, f.name) for f in fields(options_type)})  # type: ignore[arg-type]
