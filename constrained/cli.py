"""The ``constrained`` command line."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from .errors import ConstrainedError
from .schema.tool import normalize_tools
from .tools import load_tools_file


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args))
    except ConstrainedError as exc:
        print(f"constrained: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"constrained: error: {exc}", file=sys.stderr)
        return 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="constrained",
        description="Compile tool schemas into a token-level constraint in a model's own tool-call syntax.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    normalize = commands.add_parser(
        "normalize",
        help="print each tool's normalized frames and the relaxations applied",
        description="Read TOOLS (OpenAI tools, function dicts, MCP tools/list, BFCL) and print, "
        "as JSON, each tool's typed frames and the warnings for anything relaxed.",
    )
    normalize.add_argument("tools", metavar="TOOLS", help="JSON file of tool definitions")
    normalize.add_argument(
        "--loose",
        action="store_true",
        help="follow JSON Schema literally: objects without additionalProperties stay open",
    )
    normalize.set_defaults(run=_normalize)
    return parser


def _normalize(args: argparse.Namespace) -> int:
    tools = normalize_tools(load_tools_file(args.tools), strict=not args.loose)
    out = [{"name": tool.name, **tool.schema.to_json()} for tool in tools]
    json.dump(out, sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")
    return 0
