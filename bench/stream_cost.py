"""The stream parser's cost per feed against the length of the call:

    python bench/stream_cost.py [--no-write]

A ``write_file`` call (``path`` and ``content`` strings) whose content is
source code full of ``<``, quotes and newlines, of 5, 20, 50, 100 and
200 KB, rendered in every dialect and fed to
:class:`~constrained.ToolCallStreamParser` 1, 4 and 16 characters at a
time (then closed): the mean microseconds per feed over the whole stream
(each stream repeated until about 40,000 feeds are timed, as one
preemption moves a short stream's mean; the sizes interleaved in two
rounds, so that a change in the machine's load falls on all alike), the
slowest feed at 200 KB (the one that settles the call reads it whole,
about once), and the ratio of the mean at 200 KB to the mean at 5 KB (the
target is 1.5 or less: a feed costs what its delta does, not what the text
so far does). Beside them, one :func:`~constrained.parse_tool_calls` of the
finished text (the mean of 5). About a minute and a half on 2 cores.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from constrained import ToolCallStreamParser, parse_tool_calls, render_tool_calls

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import environment, write_section  # noqa: E402

DIALECTS = ("qwen3_coder", "glm45", "glm47", "gemma4", "functiongemma", "hermes")
SIZES_KB = (5, 20, 50, 100, 200)
STEPS = (1, 4, 16)
FEEDS = 40_000
"""About how many feeds are timed per size and step (at least two streams)."""
ROUNDS = 2
WRITE_FILE = {
    "name": "write_file",
    "parameters": {
        "type": "object",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["path", "content"],
    },
}
SOURCE = '''def render(items: list[str], limit: int = 10) -> str:
    """The items as an HTML list: <ul><li>...</li></ul>, at most `limit`."""
    html = ['<ul class="items">']
    for i, item in enumerate(items):
        if i < limit and item != "":
            html.append(f'  <li data-i="{i}">{escape(item)}</li>')
    return "\\n".join(html + ["</ul>"])


const ok = a < b && b > c ? 'yes' : "no";  // </div> <br/>
if (x <= 0 || y >= 1) { throw new Error("<bad> \\"input\\""); }
'''


def source(size: int) -> str:
    """``size`` characters of the source above, repeated."""
    return (SOURCE * (size // len(SOURCE) + 1))[:size]


def stream_times(text: str, dialect: str, step: int) -> list[float]:
    """Microseconds of each feed of ``text``, ``step`` characters at a time, and of ``close``."""
    parser = ToolCallStreamParser([WRITE_FILE], dialect)
    times = []
    clock = time.perf_counter_ns
    for start in range(0, len(text), step):
        piece = text[start : start + step]
        begin = clock()
        parser.feed(piece)
        times.append((clock() - begin) / 1000.0)
    begin = clock()
    parser.close()
    times.append((clock() - begin) / 1000.0)
    assert parser.result is not None and len(parser.result.tool_calls) == 1, dialect
    return times


def measure(texts: list[str], dialect: str, step: int) -> list[tuple[float, float]]:
    """For each text, the mean microseconds per feed over repeated streams
    of it, and the slowest feed (microseconds)."""
    times: list[list[float]] = [[] for _ in texts]
    for _ in range(ROUNDS):
        for timed, text in zip(times, texts):
            for _ in range(max(1, FEEDS * step // len(text) // ROUNDS)):
                timed += stream_times(text, dialect, step)
    return [(statistics.mean(timed), max(timed)) for timed in times]


def parse_ms(text: str, dialect: str) -> float:
    """Milliseconds of one ``parse_tool_calls`` of ``text`` (the mean of 5)."""
    runs = []
    for _ in range(5):
        begin = time.perf_counter()
        parse_tool_calls(text, [WRITE_FILE], dialect)
        runs.append((time.perf_counter() - begin) * 1000.0)
    return statistics.mean(runs)


def run() -> str:
    lines = [
        "## Stream parser cost per feed (`bench/stream_cost.py`)",
        "",
        f"{environment()}. One `write_file` call whose `content` is source code with `<`, quotes and newlines, "
        "fed to `ToolCallStreamParser` 1, 4 and 16 characters at a time: mean microseconds per feed over the "
        f"whole stream at each size of the content (about {FEEDS:,} feeds, streams repeated), the ratio "
        "of the mean at 200 KB to 5 KB (target: 1.5 or less), and the slowest feed at 200 KB (the one that "
        "settles the call). The `parse_tool_calls` rows: milliseconds of one parse of the finished text.",
        "",
        "| dialect | chars/feed | " + " | ".join(f"{kb} KB" for kb in SIZES_KB)
        + " | 200 KB / 5 KB | slowest feed, 200 KB |",
        "|---|---|" + "---|" * len(SIZES_KB) + "---|---|",
    ]
    for dialect in DIALECTS:
        calls = [{"name": "write_file", "arguments": {"path": "src/render.py", "content": source(kb * 1000)}} for kb in SIZES_KB]
        texts = [render_tool_calls([call], [WRITE_FILE], dialect) for call in calls]
        stream_times(texts[0], dialect, 1)  # warm-up: caches and compiled regexes
        for step in STEPS:
            started = time.perf_counter()
            measured = measure(texts, dialect, step)
            means = [mean for mean, _ in measured]
            cells = " | ".join(f"{mean:.1f} us" for mean in means)
            slowest = measured[-1][1] / 1000.0
            lines.append(f"| {dialect} | {step} | {cells} | {means[-1] / means[0]:.2f} | {slowest:.1f} ms |")
            print(f"{dialect} at {step}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
        parses = [parse_ms(text, dialect) for text in texts]
        cells = " | ".join(f"{ms:.2f} ms" for ms in parses)
        lines.append(f"| {dialect} | `parse_tool_calls` | {cells} | {parses[-1] / parses[0]:.2f} | – |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--no-write", action="store_true", help="print the section without writing RESULTS.md")
    args = parser.parse_args()
    section = run()
    if not args.no_write:
        write_section("stream_cost", section)
    print(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
