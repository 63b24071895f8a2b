"""How long a fresh interpreter takes to import the package, and the first
names a program reaches for:

    python bench/import_time.py [--repeat 5] [--rev REV]

Each statement runs in its own fresh interpreter ``--repeat`` times; the
best time is reported (the others carry the disk's and the machine's
noise). ``--rev`` times a git revision's package instead of this tree's
(its ``constrained/`` extracted to a temporary folder), for a before and
after on one machine.
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STATEMENTS = (
    "import constrained",
    "from constrained import parse_tool_calls",
    "from constrained import compile_tools",
    "from constrained import ToolCallConstraint",
)
TIMER = "import time; t = time.perf_counter(); {statement}; print(time.perf_counter() - t)"


def best_time(statement: str, folder: Path, repeat: int) -> float:
    """The fastest of ``repeat`` fresh interpreters running ``statement`` in ``folder``."""
    runs = []
    for _ in range(repeat):
        done = subprocess.run([sys.executable, "-c", TIMER.format(statement=statement)], cwd=folder,
                              capture_output=True, text=True, check=True)
        runs.append(float(done.stdout))
    return min(runs)


def extracted(rev: str, into: Path) -> Path:
    """The package at ``rev``, written under ``into``."""
    archive = subprocess.run(["git", "archive", "--format=tar", rev, "constrained"], cwd=ROOT,
                             capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rev", help="time this git revision's package instead of the working tree's")
    args = parser.parse_args()
    print(f"Python {platform.python_version()}, best of {args.repeat} fresh interpreters"
          + (f", revision {args.rev}" if args.rev else ", this tree"))
    with tempfile.TemporaryDirectory() as scratch:
        folder = extracted(args.rev, Path(scratch)) if args.rev else ROOT
        for statement in STATEMENTS:
            print(f"| `{statement}` | {best_time(statement, folder, args.repeat) * 1000:.0f} ms |")


if __name__ == "__main__":
    main()
