"""A fresh process's first call against its second, per decoding step:

    python bench/first_call.py

What a server's first user pays that its second does not: each dialect runs
in a new Python process, which loads its tokenizer, compiles a
``write_file`` tool, makes a transformers ``ToolCallLogitsProcessor`` and
drives it through a 4,000-character ``write_file`` call three times (a new
processor each time, the same compiled tools). The first run pays for
whatever was not built before its steps; the second and third find the
mask cache filled by the first. Reported: mean, p50 and max microseconds per
step of each run, the time to make the processor (where the tokenizer's
tables are built) and the ratio of the first run's mean to the second's.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import environment, summary, write_section  # noqa: E402

DIALECTS = {"qwen3_coder": "qwen3", "glm47": "qwen3", "gemma4": "gemma4", "functiongemma": "functiongemma"}
WRITE_FILE = {
    "type": "function",
    "function": {
        "name": "write_file",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
        },
    },
}


def one_process(dialect: str, tokenizer: str) -> dict:
    """Run in the child: the three runs' step times and the processor's making."""
    import torch
    from processor_step import time_processor

    from constrained import compile_tools, load_tokenizer, render_tool_calls
    from constrained.hf import ToolCallLogitsProcessor

    torch.set_num_threads(1)
    tok = load_tokenizer(tokenizer)
    compiled = compile_tools([WRITE_FILE], dialect, tok, reasoning=False)
    content = "".join(f"def f{i}(x):\n    return x < {i} and '{i}'\n" for i in range(200))[:4000]
    call = {"name": "write_file", "arguments": {"path": "a.py", "content": content}}
    tokens = tok.encode(render_tool_calls([call], [WRITE_FILE], dialect))
    runs, making = [], []
    for _ in range(3):
        start = time.perf_counter_ns()
        processor = ToolCallLogitsProcessor(compiled)
        making.append((time.perf_counter_ns() - start) / 1e6)
        runs.append(time_processor(lambda made=processor: made, tokens, tok.vocab_size))
    return {"tokens": len(tokens), "runs": runs, "making_ms": making}


def main() -> int:
    if len(sys.argv) == 3:
        print(json.dumps(one_process(sys.argv[1], sys.argv[2])))
        return 0
    lines = [
        "## A fresh process's first call and its second (`bench/first_call.py`)",
        "",
        f"{environment()}; transformers processor, one torch thread, a 4,000-character write_file call.",
        "",
        "| dialect | steps | run | making the processor ms | mean us/step | p50 | max | mean vs run 2 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for dialect, tokenizer in DIALECTS.items():
        out = subprocess.run([sys.executable, __file__, dialect, tokenizer], check=True, capture_output=True, text=True)
        result = json.loads(out.stdout.strip().splitlines()[-1])
        second = summary(result["runs"][1])[0]
        for number, (times, making) in enumerate(zip(result["runs"], result["making_ms"]), start=1):
            mean, p50, _, peak = summary(times)
            lines.append(
                f"| {dialect} | {result['tokens']} | {number} | {making:.1f} | {mean:.1f} | {p50:.1f} | {peak:.0f} "
                f"| {mean / second:.2f} |"
            )
    section = "\n".join(lines)
    write_section("first_call", section)
    print(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
