"""The same benchmarks on another revision and on this tree, side by side:

    python bench/versus.py --base REV
    python bench/versus.py --base REV --bench mask_time --args mask_time "--only BFCL --bfcl-stride 10"

Whether a change kept the speed: each benchmark runs twice in one sitting,
first on ``REV`` (checked out in a temporary git worktree, its own bench
scripts over its own package) and then on this tree, and the rows of their
tables are paired by dialect, workload and engine. What is compared is
mostly each engine's ratio to XGrammar measured in the same run, which
holds better than microseconds from one run to the next. Each benchmark
writes its own section of ``RESULTS.md`` (``versus_<script>``), so they
can be run apart. Run it alone: the two runs are only comparable on a quiet
machine.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import BENCH, environment, write_section  # noqa: E402

ROOT = BENCH.parent


class Table(NamedTuple):
    """What to read from one benchmark's printed table."""

    keys: tuple[str, ...]
    metrics: tuple[str, ...]


TABLES = {
    "mask_time": Table(("dialect", "workload", "engine"), ("mean us", "p99 us", "mean / XGrammar", "p99 / XGrammar")),
    "processor_step": Table(("dialect", "workload", "processor"), ("mean us", "p99 us", "mean / XGrammar", "p99 / XGrammar")),
    "first_call": Table(("dialect", "run"), ("making the processor ms", "mean us/step", "p50")),
}
"""The benchmarks this script knows, by script name."""


def rows(output: str, table: Table) -> dict[tuple[str, ...], dict[str, str]]:
    """The rows of every markdown table in ``output`` whose header has the
    ``table``'s columns, by their key columns."""
    found: dict[tuple[str, ...], dict[str, str]] = {}
    header: list[str] | None = None
    for line in output.splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if header is None:
            header = cells if all(c in cells for c in (*table.keys, *table.metrics)) else []
        elif header and not set(line) <= set("|-: "):
            row = dict(zip(header, cells))
            found[tuple(row[k] for k in table.keys)] = row
    return found


def run(tree: Path, script: str, args: list[str]) -> str:
    """The standard output of ``tree``'s ``bench/<script>.py`` over ``tree``'s package."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, str(tree / "bench" / f"{script}.py"), *args], cwd=tree, env=env,
                          capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{script} failed in {tree}:\n{done.stderr[-3000:]}")
    return done.stdout


def side_by_side(script: str, table: Table, base: str, before: str, after: str) -> list[str]:
    """One markdown table: each metric of ``base``'s run beside this tree's."""
    old, new = rows(before, table), rows(after, table)
    heads = [*table.keys] + [f"{metric}, {which}" for metric in table.metrics for which in (base, "this tree")]
    lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for key, row in new.items():
        if key not in old:
            continue
        cells = [cell for metric in table.metrics for cell in (old[key].get(metric, ""), row.get(metric, ""))]
        lines.append("| " + " | ".join([*key, *cells]) + " |")
    missing = sorted(set(old) ^ set(new))
    if missing:
        lines += ["", "Rows in one run only: " + "; ".join(" / ".join(key) for key in missing) + "."]
    return lines + [""]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the git revision to compare with")
    parser.add_argument("--bench", action="append", choices=sorted(TABLES),
                        help="a benchmark to run (repeatable; default: all of them)")
    parser.add_argument("--args", nargs=2, action="append", default=[], metavar=("BENCH", "ARGS"),
                        help="arguments for one benchmark, as one string (repeatable)")
    args = parser.parse_args()
    passed = {script: text.split() for script, text in args.args}
    commit = subprocess.run(["git", "rev-parse", "--short", args.base], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.strip()
    benches = args.bench or sorted(TABLES)
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch) / "base"
        subprocess.run(["git", "worktree", "add", "--detach", str(base), commit], cwd=ROOT, check=True,
                       capture_output=True)
        try:
            for script in benches:
                arguments = passed.get(script, [])
                before = run(base, script, arguments)
                after = run(ROOT, script, arguments)
                section = [
                    f"## `{script}`: this tree against another revision (`bench/versus.py`)",
                    "",
                    f"{environment()}. `{' '.join([f'bench/{script}.py', *arguments])}` ran on revision `{commit}` "
                    "and then on this tree, in one sitting; rows paired by their key columns.",
                    "",
                    *side_by_side(script, TABLES[script], commit, before, after),
                ]
                write_section(f"versus_{script}", "\n".join(section))
                print("\n".join(section))
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=ROOT, capture_output=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
