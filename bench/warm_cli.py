"""A warm ``constrained generate`` from the command line, per engine: the
wall time of a new process each run (imports, loading the default model,
compiling the tools, generating), caches warm (the converted model, the
assembled GGUF and the tokenizer already in the cache root: one untimed run
of each engine first), the engines taking turns.

    python bench/warm_cli.py [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from report import environment, write_section  # noqa: E402

TOOLS = "examples/time.tools.json"
PROMPT = "What time is it now in Tokyo? The timezone is Asia/Tokyo."
ENGINES = ("transformers", "llama-cpp")


def one_run(engine: str) -> tuple[float, str]:
    """Seconds of one command, and the call it printed."""
    command = [sys.executable, "-m", "constrained", "generate", TOOLS, "--prompt", PROMPT,
               "--tool-choice", "required", "--engine", engine, "--quiet"]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=True)
    seconds = time.perf_counter() - started
    calls = json.loads(done.stdout)["tool_calls"]
    return seconds, ", ".join(f"{c['function']['name']} {c['function']['arguments']}" for c in calls)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    for engine in ENGINES:
        one_run(engine)  # warm the caches
    times: dict[str, list[float]] = {engine: [] for engine in ENGINES}
    calls: dict[str, set[str]] = {engine: set() for engine in ENGINES}
    for _ in range(args.runs):
        for engine in ENGINES:
            seconds, call = one_run(engine)
            times[engine].append(seconds)
            calls[engine].add(call)
            print(engine, round(seconds, 2), call, flush=True)
    lines = [
        "## Warm command-line generation (`bench/warm_cli.py`)",
        "",
        f"{environment()}; llama-cpp-python {version('llama-cpp-python')}. `constrained generate {TOOLS} "
        f"--prompt \"{PROMPT}\" --tool-choice required --engine E --quiet`, a new process each run, caches warm, "
        "the engines taking turns; wall clock.",
        "",
        "| engine | runs | median | fastest | slowest | the call printed |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for engine in ENGINES:
        ordered = sorted(times[engine])
        lines.append(f"| {engine} | {len(ordered)} | {ordered[len(ordered) // 2]:.1f} s | {ordered[0]:.1f} s | "
                     f"{ordered[-1]:.1f} s | {'; '.join(sorted(calls[engine]))} |")
    write_section("warm_cli", "\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
