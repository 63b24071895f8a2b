"""docs/cli.md is the command line's reference: these tests keep it and the
parser the same (every command, every argument and its default) and check
that the exit statuses it documents are the ones the commands return."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import pytest

from constrained.cli import EXIT_MISSING_EXTRA, EXIT_OK, EXIT_REJECTED, EXIT_USAGE, build_parser, main

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "cli.md"
TIME_TOOLS = str(ROOT / "examples" / "time.tools.json")
FLAG = re.compile(r"(?<![\w-])(--?[a-zA-Z][\w-]*)")
NONE = "—"


def commands() -> dict[str, argparse.ArgumentParser]:
    """The subcommands' parsers, by name."""
    (subparsers,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(subparsers.choices)


def sections() -> dict[str, str]:
    """The doc's ``## `constrained COMMAND` `` sections by command ("" for the
    command itself), and the other sections by their title."""
    found: dict[str, str] = {}
    for chunk in re.split(r"^## ", DOC.read_text(), flags=re.M)[1:]:
        title, _, body = chunk.partition("\n")
        named = re.fullmatch(r"`constrained ?([\w-]*)`", title.strip())
        found[named[1] if named else title.strip()] = body
    return found


def table(section: str) -> dict[str, tuple[str, str]]:
    """An argument table's rows: each option string or metavar of the first
    cell -> (the first cell, the default cell)."""
    rows: dict[str, tuple[str, str]] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not line.startswith("| `") or len(cells) < 3:
            continue
        for word in re.findall(r"`([^`]+)`", cells[0]):
            rows[word.split()[0]] = (cells[0], cells[1])
    return rows


def documented_default(action: argparse.Action) -> str:
    """The default cell the doc should show for ``action``."""
    if action.required:
        return "required"
    if action.nargs == 0 or action.default is None:
        return NONE
    return f"`{action.default}`"


def arguments(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if not isinstance(a, argparse._HelpAction)]


def names(action: argparse.Action) -> list[str]:
    return list(action.option_strings) or [action.metavar or action.dest]


# -- (a) the doc and the parser list the same commands and arguments ------------------


def test_every_command_has_its_section():
    assert set(commands()) <= set(sections()), "a command without a `## `constrained COMMAND`` section"
    stray = {title for title in sections() if title.islower() and title not in commands() and title != ""}
    assert not stray, f"sections for commands the parser lacks: {stray}"


@pytest.mark.parametrize("command", sorted(commands()))
def test_every_argument_is_in_its_commands_table_with_its_default(command):
    parser, rows = commands()[command], table(sections()[command])
    for action in arguments(parser):
        for name in names(action):
            assert name in rows, f"docs/cli.md, `constrained {command}`: no row for {name}"
            assert rows[name][1] == documented_default(action), (
                f"docs/cli.md, `constrained {command}`: {name} documented with default {rows[name][1]}, "
                f"the parser's is {documented_default(action)}"
            )
    known = {name for action in arguments(parser) for name in names(action)}
    assert not set(rows) - known, f"`constrained {command}` documents arguments it lacks: {set(rows) - known}"


@pytest.mark.parametrize("command", sorted(commands()))
def test_a_commands_section_names_only_its_own_flags(command):
    known = {option for action in commands()[command]._actions for option in action.option_strings}
    named = set(FLAG.findall(sections()[command]))
    assert named <= known, f"docs/cli.md, `constrained {command}` names flags it lacks: {sorted(named - known)}"


def test_the_rest_of_the_doc_names_only_real_flags():
    top = build_parser()
    everywhere = {o for a in top._actions for o in a.option_strings}
    everywhere |= {o for parser in commands().values() for a in parser._actions for o in a.option_strings}
    rows = table(sections()[""])
    for action in top._actions:
        if not isinstance(action, argparse._SubParsersAction):
            assert all(option in rows for option in action.option_strings), action.option_strings
    outside = "".join(body for title, body in sections().items() if title not in commands())
    named = set(FLAG.findall(outside))
    assert named <= everywhere, f"docs/cli.md names flags no command has: {sorted(named - everywhere)}"


def test_the_examples_run_documented_commands():
    for block in re.findall(r"```sh\n(.*?)```", DOC.read_text(), re.S):
        for command in re.findall(r"(?:^|\$\(|\| )constrained ([\w-]+)", block, re.M):
            assert command in commands(), command


# -- (b), (c) every argument has help that says its default; every command a description


@pytest.mark.parametrize("command", ["", *sorted(commands())])
def test_every_argument_has_help_saying_its_default(command):
    parser = commands()[command] if command else build_parser()
    assert parser.description, f"constrained {command}: no description"
    for action in parser._actions:
        assert action.help and action.help.strip(), f"constrained {command} {names(action)}: no help"
        takes_value = action.nargs != 0
        if takes_value and action.default not in (None, False, argparse.SUPPRESS):
            assert "(default: %(default)s" in action.help, f"constrained {command} {names(action)}: default unsaid"
    text = parser.format_help()  # every help expands
    assert "%(" not in text


def test_every_command_has_a_summary_for_the_list():
    (subparsers,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    helps = {choice.dest: choice.help for choice in subparsers._choices_actions}
    assert set(helps) == set(commands()) and all(helps.values())


# -- (d) the exit statuses the doc lists are the commands' ---------------------------


def documented_statuses() -> dict[int, str]:
    rows = re.findall(r"^\| (\d) \| (.*) \|$", sections()["Exit status"], re.M)
    return {int(code): meaning for code, meaning in rows}


def test_the_doc_lists_the_exit_statuses_the_cli_uses():
    assert set(documented_statuses()) == {EXIT_OK, EXIT_REJECTED, EXIT_USAGE, EXIT_MISSING_EXTRA} == {0, 1, 2, 3}


HERMES_CALL = '<tool_call>\n{"name": "get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}\n</tool_call>'


def status(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """main's exit status, argparse's SystemExit included, with stdout and stderr."""
    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_status_0_accepted(capsys):
    assert status(["check", TIME_TOOLS, "--dialect", "hermes", HERMES_CALL], capsys) == (0, "", "")
    code, out, _ = status(["parse", TIME_TOOLS, "--dialect", "hermes", HERMES_CALL], capsys)
    assert code == 0 and json.loads(out)["errors"] == []
    assert status(["normalize", TIME_TOOLS], capsys)[0] == 0


def test_status_1_read_and_rejected_with_a_report(tmp_path, capsys):
    code, out, _ = status(["check", TIME_TOOLS, "--dialect", "hermes", HERMES_CALL[:-3]], capsys)
    assert code == 1 and json.loads(out)["accepted"] is False
    code, out, _ = status(["parse", TIME_TOOLS, "--dialect", "hermes", HERMES_CALL.replace("get_current", "rm")], capsys)
    assert code == 1 and json.loads(out)["errors"]
    bad = tmp_path / "tools.json"
    bad.write_text(json.dumps([{"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "strnig"}}}}]))
    code, out, _ = status(["normalize", str(bad)], capsys)
    assert code == 1 and json.loads(out)[0]["left_out"]["path"] == "/properties/x"
    code, out, err = status(["render", TIME_TOOLS, "--dialect", "hermes", '[{"name": "get_current_time"}]'], capsys)
    assert code == 1 and "get_current_time" in out and err.startswith("constrained: error: call 0 of 'get_current_time'")


def test_status_2_usage_and_unusable_input_one_line_on_stderr(tmp_path, capsys):
    code, out, err = status(["compile", TIME_TOOLS, "--dialect", "llama"], capsys)
    assert code == 2 and out == "" and "invalid choice: 'llama'" in err
    assert status(["parse", TIME_TOOLS, HERMES_CALL], capsys)[0] == 2  # --dialect is required
    assert status(["fuzz", TIME_TOOLS, "--runs", "0"], capsys)[0] == 2
    not_json = tmp_path / "broken.json"
    not_json.write_text("[{")
    not_text = tmp_path / "binary.json"
    not_text.write_bytes(b"\xff\xfe[]")
    cases = [
        (["normalize", str(tmp_path / "missing.json")], "missing.json"),
        (["normalize", str(not_json)], "broken.json: not valid JSON"),
        (["compile", str(not_text), "--dialect", "hermes"], "binary.json: not UTF-8"),
        (["compile", TIME_TOOLS, "--dialect", "hermes", "--tool-choice", "nosuch"], "nosuch"),
        (["render", TIME_TOOLS, "--dialect", "hermes", "[{"], "CALLS: not valid JSON"),
        (["render", TIME_TOOLS, "--dialect", "hermes", '[{"name": "rm", "arguments": {}}]'], "'rm'"),
    ]
    for argv, named in cases:
        code, out, err = status(argv, capsys)
        assert (code, out) == (2, ""), argv
        assert err.count("\n") == 1 and err.startswith("constrained: error: ") and named in err, err


@pytest.mark.parametrize("command", [["fuzz", TIME_TOOLS, "--dialect", "hermes", "--runs", "1"],
                                     ["generate", TIME_TOOLS, "--prompt", "hi", "--max-new-tokens", "4"]])
def test_status_3_a_missing_extra_is_one_line_naming_it(command, monkeypatch, capsys):
    for module in ("torch", "transformers", "gguf", "accelerate"):
        monkeypatch.setitem(sys.modules, module, None)  # import fails as if not installed
    code, out, err = status(command, capsys)
    assert (code, out) == (3, "")
    assert err.startswith("constrained: error: ") and "constrained[model]" in err
    assert err.splitlines()[-1].startswith("constrained: error: ")  # generate may say first that it converts
