"""The random-walk sweep, from one command:

    python bench/fuzz.py [--mcp-runs 3] [--bfcl-stride 1] [--budget 256] [--crosscheck 8] [--workers 2]
                         [--only "discriminated union"]

Tool sets: every MCP corpus tool alone, each MCP server's whole tool list as
one set, the distinct BFCL functions (every ``--bfcl-stride``-th), and the
tools taking discriminated unions (walked as the MCP sets): Pydantic unions
as an argument and in a list, and unions of parameter sets as the
parameters themselves (a Pydantic discriminated union, a plain ``oneOf``).
``--only "discriminated union"`` walks those alone (a minute) and renews
only their table by dialect in the report. Each
is compiled in every dialect (with the dialect's default tokenizer) for
``tool_choice`` auto, required, none and a tool's name, and auto and
required with ``parallel_tool_calls=False``: MCP sets in every mode with
``--mcp-runs`` walks per sampler, BFCL functions in one mode per dialect
(rotating) with one walk per sampler. Both samplers of
:mod:`constrained.qa.fuzz` walk every compiled set; every ``--crosscheck``-th
mask is compared with a plain llguidance matcher and with the applied logits.

A compile error the library raises on purpose (``ConstrainedError``) is an
expected refusal, counted per reason; anything else that raises is a crash.
Writes the ``fuzz`` section of ``bench/CONFORMANCE.md``; each failing walk
is listed with a command that replays it (its tools are written to
``bench/fuzz_failures/``). Exits 1 on any failure.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import re
import shutil
import sys
import time
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from constrained import compile_tools, load_tokenizer
from constrained.dialects import DIALECTS
from constrained.errors import ConstrainedError
from constrained.qa.fuzz import SAMPLERS, FuzzRun, FuzzSummary, WalkOptions, walk

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from corpus import CORPUS, bfcl_functions  # noqa: E402
from report import BENCH, environment, write_section  # noqa: E402

FAILURES = BENCH / "fuzz_failures"
KEEP = 1000  # failing walks kept per configuration (all of them, in practice)
LISTED = 20  # failing walks listed in the report with a replay command
_QUOTED = re.compile(r"'[^']*'")  # names in a refusal's message, left out to count refusals by reason


@dataclass(frozen=True)
class ToolSet:
    name: str
    kind: str
    tools: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class Mode:
    label: str
    tool_choice: str  # "named": the set's chosen tool
    parallel: bool


MODES = (
    Mode("auto", "auto", True),
    Mode("required", "required", True),
    Mode("none", "none", True),
    Mode("named", "named", True),
    Mode("auto, one call", "auto", False),
    Mode("required, one call", "required", False),
)


@dataclass(frozen=True)
class Job:
    tool_set: ToolSet
    dialect: str
    mode: Mode
    seeds: tuple[int, ...]
    budget: int
    crosscheck: int

    @property
    def tool_choice(self) -> str:
        if self.mode.tool_choice != "named":
            return self.mode.tool_choice
        tools = self.tool_set.tools
        return str(tools[zlib.crc32(self.tool_set.name.encode()) % len(tools)]["name"])


@dataclass
class JobResult:
    job: Job
    summaries: dict[str, FuzzSummary] = field(default_factory=dict)
    refusal: str | None = None
    crash: str | None = None


def tool_sets(bfcl_stride: int) -> list[ToolSet]:
    """Every MCP tool alone, every MCP server's tools together, and every
    ``bfcl_stride``-th distinct BFCL function."""
    sets = []
    for path in sorted((CORPUS / "mcp").glob("*.tools.json")):
        server = path.name.removesuffix(".tools.json")
        tools = tuple(json.loads(path.read_text())["tools"])
        sets.extend(ToolSet(f"{server}/{tool['name']}", "MCP tool", (tool,)) for tool in tools)
        sets.append(ToolSet(f"{server} (all {len(tools)})", "MCP server", tools))
    distinct = {json.dumps(f, sort_keys=True): f for f in bfcl_functions()}
    for index, function in enumerate(list(distinct.values())[::bfcl_stride]):
        sets.append(ToolSet(f"bfcl#{index} {function['name']}", "BFCL function", (function,)))
    sets.extend(ToolSet(tool["name"], DISCRIMINATED, (tool,)) for tool in discriminated_tools())
    return sets


DISCRIMINATED = "discriminated union"


def discriminated_tools() -> list[dict[str, Any]]:
    """Tools as FastMCP writes Pydantic discriminated unions (``oneOf`` of
    ``$ref``s with a ``discriminator``, each branch's tag a ``const`` with a
    default, not required): one union as an argument, and a list of them."""
    from typing import Annotated, Literal

    from pydantic import BaseModel, Field

    class GetItem(BaseModel):
        operation: Literal["GetItem"] = "GetItem"
        table: str
        key: str

    class PutItem(BaseModel):
        operation: Literal["PutItem"] = "PutItem"
        table: str
        key: str
        value: str = ""

    class DeleteItem(BaseModel):
        operation: Literal["DeleteItem"] = "DeleteItem"
        table: str
        key: str

    Operation = Annotated[GetItem | PutItem | DeleteItem, Field(discriminator="operation")]

    class RunOperation(BaseModel):
        request: Operation

    class RunBatch(BaseModel):
        requests: list[Operation]
        dry_run: bool = False

    nested = [{"name": model.__name__, "inputSchema": model.model_json_schema()} for model in (RunOperation, RunBatch)]
    return nested + root_union_tools()


def root_union_tools() -> list[dict[str, Any]]:
    """Tools whose parameters are themselves a union of parameter sets: a
    Pydantic discriminated union as the root (``oneOf`` of ``$ref``s with a
    ``discriminator``, each tag a required ``const``), where ``value`` is
    an integer, a string, a boolean, a number, a short string or a list by
    the tag, two sets writing ``value`` before the tag; and a plain
    ``oneOf`` with ``const`` tags and no ``discriminator`` keyword."""
    from typing import Annotated, Literal

    from pydantic import BaseModel, Field, TypeAdapter

    class Count(BaseModel):
        kind: Literal["count"]
        value: int

    class Text(BaseModel):
        kind: Literal["text"]
        value: str

    class Flag(BaseModel):
        kind: Literal["flag"]
        value: bool

    class Ratio(BaseModel):
        value: float
        kind: Literal["ratio"]

    class Note(BaseModel):
        value: str
        kind: Literal["note"]

    class Label(BaseModel):
        kind: Literal["label"]
        value: str = Field(max_length=12)

    class Tags(BaseModel):
        kind: Literal["tags"]
        value: list[str]

    Limit = Annotated[Count | Text | Flag | Ratio | Note | Label | Tags, Field(discriminator="kind")]
    plain = {
        "type": "object",
        "oneOf": [
            {"type": "object", "properties": {"mode": {"const": "fixed"}, "size": {"type": "integer", "minimum": 1}},
             "required": ["mode", "size"], "additionalProperties": False},
            {"type": "object", "properties": {"mode": {"const": "named"}, "size": {"enum": ["small", "large"]},
                                              "note": {"type": "string"}},
             "required": ["mode", "size"], "additionalProperties": False},
            {"type": "object", "properties": {"size": {"type": "boolean"}, "mode": {"const": "auto"}},
             "required": ["mode"], "additionalProperties": False},
        ],
    }
    return [
        {"name": "set_limit", "inputSchema": TypeAdapter(Limit).json_schema()},
        {"name": "set_size", "inputSchema": plain},
    ]


def jobs(sets: list[ToolSet], mcp_runs: int, budget: int, crosscheck: int) -> list[Job]:
    made = []
    for dialect_index, dialect in enumerate(sorted(DIALECTS)):
        bfcl = 0
        for tool_set in sets:
            if tool_set.kind == "BFCL function":
                modes, runs = [MODES[(bfcl + dialect_index) % len(MODES)]], 1
                bfcl += 1
            else:
                modes, runs = list(MODES), mcp_runs
            for mode in modes:
                base = zlib.crc32(f"{tool_set.name}|{dialect}|{mode.label}".encode())
                seeds = tuple(base + run for run in range(runs))
                made.append(Job(tool_set, dialect, mode, seeds, budget, crosscheck))
    return made


def run_job(job: Job) -> JobResult:
    """Compile one configuration and walk it with both samplers."""
    result = JobResult(job)
    try:
        compiled = compile_tools(
            list(job.tool_set.tools),
            job.dialect,
            DIALECTS[job.dialect].default_tokenizer,
            tool_choice=job.tool_choice,
            parallel_tool_calls=job.mode.parallel,
        )
    except ConstrainedError as exc:
        reason = _QUOTED.sub("'…'", str(exc))
        result.refusal = f"{type(exc).__name__}: {reason}"
        return result
    except Exception as exc:  # a crash, reported with the configuration
        result.crash = f"{type(exc).__name__}: {exc}"
        return result
    for sampler in SAMPLERS:
        summary = result.summaries[sampler] = FuzzSummary(keep=KEEP)
        for seed in job.seeds:
            # Odd seeds also take the fast-forward and rollback paths.
            options = WalkOptions(sampler, job.budget, job.crosscheck, fast_forward=seed % 2 == 1, rollback=seed % 2 == 1)
            summary.add(walk(compiled, seed, options))
    return result


def _init_worker() -> None:
    import torch

    torch.set_num_threads(1)


def _preload() -> None:
    """Load every default tokenizer (and its llguidance tokenizer) before
    the workers fork, so they share it."""
    for name in sorted({dialect.default_tokenizer for dialect in DIALECTS.values()}):
        tok = load_tokenizer(name)
        tok.ll_tokenizer  # noqa: B018 - built once, inherited by the workers
        tok.token_table  # noqa: B018


def _row(name: list[str], summary: FuzzSummary) -> str:
    valid = f"{summary.valid} ({summary.valid / summary.finished:.0%})" if summary.finished else "0"
    cells = [*name, summary.runs, summary.finished, valid, summary.wedges, summary.errors, summary.budget_exhausted]
    return "| " + " | ".join(str(cell) for cell in cells) + " |"


def _failure_kind(run: FuzzRun) -> str:
    """A failure's first problem with names and offsets left out, to count
    failures by kind."""
    first = run.detail or run.problems[0]
    return re.sub(r"\d+", "N", _QUOTED.sub("'…'", first))[:160].replace("|", "\\|")


def _write_failures(failures: list[tuple[ToolSet, FuzzRun]]) -> list[str]:
    """Report lines for the failing walks: a count by dialect and kind, and
    the first :data:`LISTED` with a replay command (their tools written to
    ``bench/fuzz_failures/``)."""
    kinds = Counter((run.dialect, run.outcome.value, _failure_kind(run)) for _, run in failures)
    lines = [f"**Failures**: {len(failures)} walks.", "", "| dialect | outcome | first problem | walks |",
             "|---|---|---|---|"]
    lines += [f"| {dialect} | {outcome} | {kind} | {count} |" for (dialect, outcome, kind), count in sorted(kinds.items())]
    lines += ["", f"The first {min(LISTED, len(failures))}, each with the command that replays it:", ""]
    FAILURES.mkdir()
    for index, (tool_set, run) in enumerate(failures[:LISTED]):
        path = FAILURES / f"{index}.tools.json"
        path.write_text(json.dumps(list(tool_set.tools), indent=1, ensure_ascii=False), encoding="utf-8")
        what = run.detail or "; ".join(run.problems)
        lines.append(
            f"- {tool_set.kind} `{tool_set.name}`, {run.outcome.value}: {what[:300]}\n"
            f"  text: `{run.text[:200]!r}`\n"
            f"  replay: `constrained fuzz {path.relative_to(BENCH.parent)} {run.replay_options()}`"
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mcp-runs", type=int, default=3, help="walks per sampler and MCP configuration")
    parser.add_argument("--bfcl-stride", type=int, default=1, help="take every n-th distinct BFCL function")
    parser.add_argument("--budget", type=int, default=256, help="most tokens per walk")
    parser.add_argument("--crosscheck", type=int, default=8, help="compare every n-th mask with llguidance's")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--only",
        choices=[DISCRIMINATED],
        help="walk only these tool sets and renew only their table by dialect (the rest of the report stays)",
    )
    args = parser.parse_args()

    started = time.perf_counter()
    sets = tool_sets(args.bfcl_stride)
    if args.only:
        sets = [tool_set for tool_set in sets if tool_set.kind == args.only]
    work = jobs(sets, args.mcp_runs, args.budget, args.crosscheck)
    _preload()
    rows: dict[tuple[str, str, str], FuzzSummary] = {}
    totals = {sampler: FuzzSummary(keep=0) for sampler in SAMPLERS}
    refusals: Counter[tuple[str, str]] = Counter()
    by_kind: dict[str, FuzzSummary] = {}
    unions: dict[str, FuzzSummary] = {}  # the discriminated-union tool sets, by dialect
    crashes: list[tuple[Job, str]] = []
    failures: list[tuple[ToolSet, FuzzRun]] = []
    with multiprocessing.get_context("fork").Pool(args.workers, initializer=_init_worker) as pool:
        for done, result in enumerate(pool.imap_unordered(run_job, work, chunksize=4), 1):
            job = result.job
            if result.refusal is not None:
                refusals[job.dialect, result.refusal] += 1
            if result.crash is not None:
                crashes.append((job, result.crash))
            for sampler, summary in result.summaries.items():
                rows.setdefault((job.dialect, job.mode.label, sampler), FuzzSummary(keep=0)).merge(summary)
                totals[sampler].merge(summary)
                by_kind.setdefault(job.tool_set.kind, FuzzSummary(keep=0)).merge(summary)
                if job.tool_set.kind == DISCRIMINATED:
                    unions.setdefault(job.dialect, FuzzSummary(keep=0)).merge(summary)
                failures.extend((job.tool_set, run) for run in summary.failures)
            if done % 500 == 0:
                print(f"{done}/{len(work)} configurations, {time.perf_counter() - started:.0f} s", file=sys.stderr)
    elapsed = time.perf_counter() - started

    shutil.rmtree(FAILURES, ignore_errors=True)
    failures.sort(key=lambda failure: (failure[0].name, failure[1].dialect, failure[1].tool_choice, failure[1].seed,
                                       failure[1].options.sampler))
    everything = FuzzSummary(keep=0)
    for summary in totals.values():
        everything.merge(summary)
    kinds = Counter(tool_set.kind for tool_set in sets)
    header = "| {} | runs | finished | valid (of finished) | wedges | errors | budget exhausted |"
    rule = "|---" * 7 + "|"
    union_table = _union_table(sets, unions, header, rule, args, len(work), elapsed, failures, crashes, refusals)
    if args.only:
        write_section(UNION_SECTION, union_table, path=BENCH / "CONFORMANCE.md")
        print(json.dumps({dialect: summary.counts() for dialect, summary in sorted(unions.items())}
                         | {"seconds": round(elapsed), "configurations": len(work), "refused": sum(refusals.values()),
                            "crashes": len(crashes)}, indent=1))
        return 1 if failures or crashes or not all(summary.ok for summary in unions.values()) else 0
    lines = [
        "## Random-walk fuzzing",
        "",
        "Produced by `python bench/fuzz.py`. Each walk samples seeded tokens from the mask a "
        "`ToolCallConstraint` fills (its host bitmask, precomputed raw-text rows included) and consumes them, until "
        f"the grammar finishes or {args.budget} tokens; every {args.crosscheck}th mask is compared with a plain "
        "llguidance matcher fed the same tokens and with the logits `apply` masks. Walks with an odd seed also "
        "feed the tokens the grammar forces unsampled (fast-forward, `consume_row`) and now and then roll back 1-8 "
        "tokens. A finished output must parse "
        "with no errors (so validate against the tool's schema), have one parsed call per call marker, and respect "
        "`tool_choice` (required: a call; a name: only that tool; none: no call; one call: at most one). A wedge "
        "is an unfinished grammar whose mask allows no token. Samplers: `uniform` over the allowed tokens; "
        "`steered` leans towards special tokens, punctuation and the grammar's literals so walks close values "
        "and calls (uniform walks rarely do: budget exhausted is their usual end, not a failure).",
        "",
        f"Tool sets: {kinds['MCP tool']} MCP tools alone and {kinds['MCP server']} MCP servers' tool lists, in "
        f"every mode ({'; '.join(m.label for m in MODES)}) with {args.mcp_runs} walks per sampler; "
        f"{kinds['BFCL function']} distinct BFCL functions"
        f"{f' (every {args.bfcl_stride}th)' if args.bfcl_stride > 1 else ' (all)'}, one mode per dialect "
        f"(rotating), one walk per sampler; {kinds[DISCRIMINATED]} tools taking discriminated unions "
        "(Pydantic's as FastMCP writes them, as an argument, in a list and as the parameters themselves, and a plain "
        "`oneOf` of parameter sets), as the MCP sets. Every dialect with its default tokenizer.",
        "",
        environment(),
        "",
        header.format("sampler"),
        rule,
        *(_row([sampler], summary) for sampler, summary in totals.items()),
        _row(["**all**"], everything),
        "",
        f"{len(work)} configurations in {elapsed:.0f} s with {args.workers} worker processes; "
        f"{everything.precomputed_steps} masks came from precomputed raw-text rows.",
        "",
        header.format("tool sets"),
        rule,
        *(_row([kind], summary) for kind, summary in sorted(by_kind.items())),
        "",
        f"<!-- {UNION_SECTION} -->",
        union_table,
        f"<!-- /{UNION_SECTION} -->",
        "",
    ]
    if failures:
        lines += _write_failures(failures)
    if crashes:
        lines += ["", f"**Compile crashes**: {len(crashes)}.", ""]
        lines += [f"- compile crash, {job.tool_set.kind} `{job.tool_set.name}`, {job.dialect}, {job.mode.label}: "
                  f"{crash[:300]}" for job, crash in crashes]
    if not failures and not crashes:
        lines.append("**Failures:** none: no wedge, no error, every finished output valid.")
    lines.append("")
    if refusals:
        lines += ["Compiles refused on purpose (counted, not run):", "", "| dialect | reason | configurations |",
                  "|---|---|---|"]
        lines += [f"| {dialect} | {reason} | {count} |" for (dialect, reason), count in sorted(refusals.items())]
    else:
        lines.append("No compile was refused.")
    lines += ["", "By dialect, tool_choice and sampler:", "", header.format("dialect | tool_choice | sampler"),
              "|---|---" + rule]
    lines += [_row(list(key), rows[key]) for key in sorted(rows, key=lambda k: (k[0], _mode_order(k[1]), k[2]))]
    write_section("fuzz", "\n".join(lines), path=BENCH / "CONFORMANCE.md")
    print(json.dumps({sampler: summary.counts() for sampler, summary in totals.items()}
                     | {"seconds": round(elapsed), "configurations": len(work), "refused": sum(refusals.values()),
                        "crashes": len(crashes)}, indent=1))
    return 1 if failures or crashes or not everything.ok else 0


UNION_SECTION = "fuzz-discriminated"
"""The block of the fuzz section with the discriminated-union tool sets by
dialect, which ``--only "discriminated union"`` renews alone."""


def _union_table(
    sets: list[ToolSet],
    unions: dict[str, FuzzSummary],
    header: str,
    rule: str,
    args: argparse.Namespace,
    configurations: int,
    elapsed: float,
    failures: list[tuple[ToolSet, FuzzRun]],
    crashes: list[tuple[Job, str]],
    refusals: Counter[tuple[str, str]],
) -> str:
    """The discriminated-union tool sets by dialect, with the run that
    produced the table."""
    names = ", ".join(f"`{tool_set.name}`" for tool_set in sets if tool_set.kind == DISCRIMINATED)
    options = [f"--{name.replace('_', '-')} {getattr(args, name)}" for name, default in
               (("mcp_runs", 3), ("bfcl_stride", 1), ("budget", 256), ("crosscheck", 8)) if getattr(args, name) != default]
    if args.only:
        options.append(f'--only "{DISCRIMINATED}"')
    command = " ".join(["python bench/fuzz.py", *options])
    total = FuzzSummary(keep=0)
    for summary in unions.values():
        total.merge(summary)
    lines = [
        "### Discriminated unions by dialect",
        "",
        f"Produced by `{command}` ({environment()}): the tools taking discriminated unions ({names}: "
        "one union as an argument, a list of them, a Pydantic discriminated union as the parameters themselves, "
        "and a plain `oneOf` of parameter sets told apart by `const` tags), in every mode with "
        f"{args.mcp_runs} walks per sampler, both samplers together; {configurations} configurations in "
        f"{elapsed:.0f} s." + (" The tables above are from the last full run." if args.only else ""),
        "",
        header.format("dialect"),
        rule,
        *(_row([dialect], summary) for dialect, summary in sorted(unions.items())),
        _row(["**all**"], total),
        "",
    ]
    union_failures = [failure for failure in failures if failure[0].kind == DISCRIMINATED]
    union_crashes = [crash for crash in crashes if crash[0].tool_set.kind == DISCRIMINATED]
    if args.only and union_failures:
        lines += _write_failures(union_failures)
    if args.only and union_crashes:
        lines += [f"- compile crash, `{job.tool_set.name}`, {job.dialect}, {job.mode.label}: {crash[:300]}"
                  for job, crash in union_crashes]
    if union_failures or union_crashes:
        lines.append(f"**Failures**: {len(union_failures)} walks, {len(union_crashes)} compile crashes.")
    else:
        lines.append("**Failures:** none: no wedge, no error, every finished output valid.")
    if args.only and refusals:
        lines.append(f"Compiles refused on purpose: {sum(refusals.values())}.")
    return "\n".join(lines)


def _mode_order(label: str) -> int:
    return [mode.label for mode in MODES].index(label)


if __name__ == "__main__":
    sys.exit(main())
