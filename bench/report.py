"""Shared by the benchmark scripts: the environment line, summaries, and
writing one script's section of ``bench/RESULTS.md`` (the other sections
stay as their scripts last wrote them)."""

from __future__ import annotations

import datetime
import os
import platform
import re
import statistics
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "RESULTS.md"
TITLE = "# Benchmarks, side by side\n\nEach section is written by the script it names; ratios compare engines measured in the same run.\n"
CONFORMANCE = BENCH / "CONFORMANCE.md"
# The head of each report file, whichever script writes to it first.
TITLES = {
    RESULTS: TITLE,
    CONFORMANCE: "# Conformance\n\nEach section is written by the script it names (`bench/conformance.py`: `jsts`, `maskbench`, `roundtrip`; `bench/fuzz.py`: `fuzz`).\n",
}


def environment() -> str:
    """Date, versions and machine, for the head of a section."""
    versions = []
    for package in ("llguidance", "xgrammar", "torch", "transformers"):
        try:
            versions.append(f"{package} {version(package)}")
        except PackageNotFoundError:
            pass
    cpus = os.cpu_count()
    return (
        f"{datetime.date.today()}; {', '.join(versions)}; Python {platform.python_version()}; "
        f"{platform.machine()}, {cpus} CPUs ({platform.processor() or platform.system()})"
    )


def summary(times: list[float]) -> tuple[float, float, float, float]:
    """Mean, p50, p99 and max."""
    ordered = sorted(times)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return statistics.mean(times), statistics.median(times), p99, ordered[-1]


def write_section(name: str, markdown: str, path: Path = RESULTS) -> None:
    """Replace the section ``name`` of ``path`` (added at the end if new),
    under the file's title (:data:`TITLES`)."""
    title = TITLES.get(Path(path).resolve(), TITLE)
    text = path.read_text(encoding="utf-8") if path.exists() else title
    if not text.startswith(title):
        # Another head (an older title): keep the sections, renew the head.
        sections = text.find("<!-- ")
        text = title + ("\n" + text[sections:] if sections >= 0 else "")
    begin, end = f"<!-- {name} -->", f"<!-- /{name} -->"
    block = f"{begin}\n{markdown.strip()}\n{end}"
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    text = pattern.sub(lambda _: block, text) if pattern.search(text) else text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text, encoding="utf-8")


def plot_distributions(panels: list[tuple[str, dict[str, list[float]]]], path: str | Path, ylabel: str) -> None:
    """Box plots (whiskers p1-p99, log scale), one panel per workload with a
    box per engine, saved as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = min(5, len(panels))
    rows = (len(panels) + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(4 * columns, 3.6 * rows), sharey=True, squeeze=False)
    for ax, (title, times) in zip(axes.flat, panels):
        names = list(times)
        ax.boxplot([times[n] for n in names], whis=(1, 99), showfliers=False)
        ax.set_xticks(range(1, len(names) + 1), [n.replace("XGrammar 0.2.9", "XGrammar") for n in names],
                      rotation=25, fontsize=7)
        ax.set_yscale("log")
        ax.set_title(title, fontsize=9)
    for ax in axes.flat[len(panels):]:
        ax.axis("off")
    axes[0][0].set_ylabel(ylabel)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
