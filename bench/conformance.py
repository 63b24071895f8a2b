"""Conformance against external suites, written to ``bench/CONFORMANCE.md``:

    python bench/conformance.py [--stride N] [--dialects qwen3_coder,hermes] [--suites jsts,maskbench,roundtrip]

Every instance goes through the whole pipeline in every dialect
(:mod:`constrained.qa.conformance`): rendered as the dialect writes it, checked
by the compiled constraint, parsed back with the tools, compared type for
type with the instance.

- ``jsts``: the JSON-Schema-Test-Suite, draft 2020-12, required and
  ``optional/`` groups: each group's schema is the parameters of one tool
  ``f`` (non-object schemas wrapped as the single required parameter
  ``value``), compiled with ``strict=False`` (JSON Schema literally) and
  ``tool_choice="required"``.
- ``maskbench``: every MaskBench case, the same way.
- ``roundtrip``: BFCL v3 ground-truth calls (with their entry's functions,
  strict object policy) and one call of every MCP corpus tool (arguments
  from its schema, every tool of its server declared).

``--stride N`` takes every N-th group, case and BFCL entry. Each script
section of the report (``jsts``, ``maskbench``, ``roundtrip``) is replaced
on its own; other sections of the file stay as they are.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import jsonschema

from constrained.dialects import DIALECTS
from constrained.qa.conformance import Call, Outcome, Verdict, judge_calls, judge_schema, schema_tool

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from corpus import (  # noqa: E402  (the corpus readers the tests use)
    JSTS_KNOWN_MISSES,
    MASKBENCH_KNOWN_MISSES,
    SchemaGroup,
    bfcl_entries,
    bfcl_facts,
    jsts_deviation,
    jsts_groups,
    maskbench_groups,
    mcp_calls,
)
from report import CONFORMANCE, environment, write_section  # noqa: E402

REPORT = CONFORMANCE
# Lines of set-aside instances shown per section (misses are always all shown).
MAX_SET_ASIDE = 400


@dataclass(frozen=True)
class Row:
    """One instance judged in one dialect. ``deviation``: the listed
    deliberate deviation that explains a failure, if any; ``cause``: what
    causes a miss, where known."""

    source: str
    group: str
    test: str
    dialect: str
    verdict: Verdict
    deviation: str | None = None
    cause: str | None = None

    @property
    def kind(self) -> str:
        """The column the row is counted in."""
        outcome = self.verdict.outcome
        if self.deviation is not None:
            return "deviation"
        if outcome is Outcome.INVALID_ACCEPTED:
            return "invalid accepted, exact" if self.verdict.exact else "invalid accepted, relaxed"
        if outcome is Outcome.REFUSED:
            return "refused, valid" if self.verdict.valid else "refused, invalid"
        if outcome in (Outcome.READS_AS_ANOTHER_VALUE, Outcome.READ_BACK_DIFFERS):
            return f"{outcome.value}, {'valid' if self.verdict.valid else 'invalid'}"
        return outcome.value


# Counted in the denominator of "valid accepted": valid instances the dialect can write.
REPRESENTABLE = ("accepted", "valid rejected", "read back differs, valid", "refused, valid")


def schema_rows(
    groups: Iterable[SchemaGroup],
    dialects: Sequence[str],
    deviation: Callable[[SchemaGroup], str | None] = lambda group: None,
    causes: dict[str, str] | None = None,
) -> Iterator[Row]:
    """Every test of every group, judged in every dialect; a failure in a
    group with a listed ``deviation`` is counted as that, and one in a file
    of ``causes`` carries its cause."""
    for group in groups:
        instances = [(test.data, test.valid) for test in group.tests]
        why = deviation(group)
        cause = (causes or {}).get(group.source)
        for dialect in dialects:
            for test, verdict in zip(group.tests, judge_schema(group.schema, instances, dialect)):
                failed = verdict.failed
                yield Row(group.source, group.description, test.description, dialect, verdict,
                          why if failed else None, cause if failed and why is None else None)


def wrapping_changes(groups: Iterable[SchemaGroup]) -> tuple[list[str], int]:
    """Instances of wrapped schemas on which ``jsonschema`` judges the wrapped
    arguments otherwise than the bare instance (an error on one side counts):
    the wrapping must keep each schema's meaning, its ``#`` references and
    ``$defs`` included. Also how many instances were compared."""
    changes, compared = [], 0
    for group in groups:
        tool = schema_tool(group.schema)
        if not tool.wrapped:
            continue
        for test in group.tests:
            bare = jsonschema_verdict(group.schema, test.data)
            wrapped = jsonschema_verdict(tool.definition["parameters"], tool.arguments(test.data))
            compared += 1
            if bare != wrapped:
                changes.append(f"{group.source} / {group.description} / {test.description}: {bare} -> {wrapped}")
    return changes, compared


def jsonschema_verdict(schema: object, instance: object) -> str:
    """``jsonschema``'s verdict ("valid", "invalid", or the error it raises)."""
    try:
        validator = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)(schema)
        return "valid" if validator.is_valid(instance) else "invalid"
    except Exception as exc:  # a reference it cannot follow, a pattern Python cannot read
        return type(exc).__name__


def roundtrip_rows(stride: int, dialects: Sequence[str]) -> Iterator[Row]:
    """BFCL ground truth whose calls are valid (the corpus facts excepted)
    and one call of every MCP tool, each judged in every dialect."""
    facts = bfcl_facts()
    for entry in bfcl_entries()[::stride]:
        if entry.id in facts:
            continue
        calls = [Call(name, arguments, True) for name, arguments in entry.calls]
        for dialect in dialects:
            for index, verdict in enumerate(judge_calls(entry.functions, calls, dialect)):
                yield Row("BFCL " + entry.id.rsplit("_", 1)[0], entry.id, f"call {index + 1}: {calls[index].name}", dialect, verdict)
    for call in mcp_calls():
        for dialect in dialects:
            (verdict,) = judge_calls(call.tools, [Call(call.name, call.arguments, True)], dialect)
            yield Row(f"MCP {call.server}", call.name, "sample arguments", dialect, verdict)


# -- the report ------------------------------------------------------------------

SUMMARY_COLUMNS = (
    "accepted",
    "valid rejected",
    "invalid accepted, exact",
    "invalid accepted, relaxed",
    "read back differs, valid",
    "read back differs, invalid",
    "rejected",
    "rejected by validation",
    "reads as another value, invalid",
    "reads as another value, valid",
    "unrepresentable",
    "known limit",
    "deviation",
    "not an object",
    "refused, valid",
    "refused, invalid",
)
FAILURE_KINDS = (
    "valid rejected",
    "invalid accepted, exact",
    "invalid accepted, relaxed",
    "read back differs, valid",
    "read back differs, invalid",
    "refused, valid",
)
SET_ASIDE_KINDS = ("deviation", "known limit", "unrepresentable", "reads as another value, valid", "reads as another value, invalid")


def percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.2f}%" if whole else "n/a"


def summary_table(rows: Sequence[Row], dialects: Sequence[str]) -> str:
    """Per dialect: valid accepted of representable, exact-claim invalid
    instances accepted, then every column that is not zero."""
    by_dialect = {dialect: Counter(row.kind for row in rows if row.dialect == dialect) for dialect in dialects}
    seen = {kind for counts in by_dialect.values() for kind, n in counts.items() if n}
    seen.discard("invalid accepted, exact")  # its own column
    columns = [c for c in SUMMARY_COLUMNS if c in seen] + sorted(seen - set(SUMMARY_COLUMNS))
    lines = [
        "| dialect | valid accepted / representable | exact-claim invalid accepted | " + " | ".join(columns) + " |",
        "|---|---|---:|" + "---:|" * len(columns),
    ]
    for dialect in dialects:
        counts = by_dialect[dialect]
        representable = sum(counts[kind] for kind in REPRESENTABLE)
        cells = [f"{counts['accepted']}/{representable} ({percent(counts['accepted'], representable)})",
                 str(counts["invalid accepted, exact"])] + [str(counts[c]) for c in columns]
        lines.append(f"| {dialect} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def grid_table(rows: Sequence[Row], dialects: Sequence[str], label: str, key: Callable[[Row], str]) -> str:
    """One line per ``key`` (a file, a family), one cell per dialect: valid
    accepted of representable, and exact-claim invalid instances accepted."""
    cells: dict[str, dict[str, Counter[str]]] = defaultdict(lambda: {d: Counter() for d in dialects})
    for row in rows:
        cells[key(row)][row.dialect][row.kind] += 1
    lines = [f"| {label} | " + " | ".join(dialects) + " |", "|---|" + "---|" * len(dialects)]
    for name in sorted(cells):
        counts = [cells[name][d] for d in dialects]
        lines.append(
            f"| {name} | "
            + " | ".join(f"{c['accepted']}/{sum(c[k] for k in REPRESENTABLE)} · {c['invalid accepted, exact']}" for c in counts)
            + " |"
        )
    return "\n".join(lines)


def relaxed_table(rows: Sequence[Row], dialects: Sequence[str]) -> str:
    """For each relaxed keyword, how many schemas compiled with it, per dialect."""
    schemas: dict[str, dict[str, set[tuple[str, str]]]] = defaultdict(lambda: {d: set() for d in dialects})
    for row in rows:
        for keyword in row.verdict.relaxed:
            schemas[keyword][row.dialect].add((row.source, row.group))
    if not schemas:
        return "No schema was relaxed."
    lines = ["| relaxed keyword | " + " | ".join(dialects) + " |", "|---|" + "---:|" * len(dialects)]
    for keyword in sorted(schemas, key=lambda k: (-max(len(s) for s in schemas[k].values()), k)):
        lines.append(f"| `{keyword}` | " + " | ".join(str(len(schemas[keyword][d])) for d in dialects) + " |")
    return "\n".join(lines)


def refusals(rows: Sequence[Row]) -> str:
    """Schemas or tools the compiler refused or left out (schema x dialect),
    by error and cause: the reason with the tool's name and the pointer left
    out, so one cause in many schemas is one line."""
    refused = {(r.source, r.group, r.dialect): r for r in rows if r.verdict.outcome is Outcome.REFUSED}
    causes = Counter(_cause(row.verdict.reason) for row in refused.values())
    if not causes:
        return "**Refused tools**: none."
    lines = [f"**Refused tools** ({len(refused)} schema x dialect), by cause:", "",
             "| error | cause | schema x dialect |", "|---|---|---:|"]
    for (kind, cause), count in sorted(causes.items(), key=lambda item: (-item[1], item[0])):
        lines.append(f"| {kind} | {cause.replace('|', chr(92) + '|')} | {count} |")
    return "\n".join(lines)


_NAMED = re.compile(r"^(tool '[^']*'( left out)?(, | at )?)?(schema at [^:]*: )?(/[^:]*: )?")


def _cause(reason: str) -> tuple[str, str]:
    """A refusal's error class and its cause, without the tool's name and pointer."""
    kind, _, message = reason.partition(": ")
    cause = _NAMED.sub("", message)
    cause = re.sub(r"'[^']*'", "'...'", cause)
    return kind, cause[:120]


def listing(rows: Sequence[Row], kinds: Sequence[str], title: str, limit: int | None = None) -> str:
    """Every row of ``kinds`` (the first ``limit`` lines, when given):
    dialects that agree on the outcome and reason share one line."""
    merged: dict[tuple[str, str, str, str, str], list[str]] = defaultdict(list)
    for row in rows:
        if row.kind in kinds:
            reason = row.deviation or row.verdict.reason + (f" (cause: {row.cause})" if row.cause else "")
            merged[(row.source, row.group, row.test, row.kind, reason)].append(row.dialect)
    if not merged:
        return f"**{title}**: none."
    lines = [f"**{title}** ({len(merged)} lines):", "", "| file | group | test | dialects | outcome | reason |", "|---|---|---|---|---|---|"]
    for (source, group, test, kind, reason), dialects in sorted(merged.items())[:limit]:
        cells = [source, group, test, ", ".join(dialects), kind, reason]
        lines.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", "\\n") for c in cells) + " |")
    if limit is not None and len(merged) > limit:
        lines.append(f"\n({len(merged) - limit} more not shown.)")
    return "\n".join(lines)


@dataclass
class Section:
    """What one suite's section shows."""

    title: str
    intro: str
    rows: list[Row]
    summaries: list[tuple[str, Callable[[Row], bool]]]
    grid: tuple[str, Callable[[Row], str]]
    notes: list[str]

    def markdown(self, dialects: Sequence[str]) -> str:
        parts = [f"## {self.title}", "", self.intro, ""]
        for label, keep in self.summaries:
            parts += [f"{label}:", "", summary_table([r for r in self.rows if keep(r)], dialects), ""]
        label, key = self.grid
        parts += [f"Per {label} (cell: valid accepted/representable · exact-claim invalid accepted):", "",
                  grid_table(self.rows, dialects, label, key), ""]
        parts += ["Relaxed keywords (schemas compiled with a warning of that keyword):", "", relaxed_table(self.rows, dialects), ""]
        parts += [refusals(self.rows), "", *self.notes, "", listing(self.rows, FAILURE_KINDS, "Misses"), "",
                  listing(self.rows, SET_ASIDE_KINDS, "Set aside (not in the denominators)", limit=MAX_SET_ASIDE)]
        return "\n".join(parts)


def every(row: Row) -> bool:
    return True


def family(source: str) -> str:
    """A MaskBench case's family: its file name without ``---NAME`` or a
    number (``BFCL_simple``, ``Glaiveai2K``, ``JME``, ``MCPspec``, ...)."""
    return re.sub(r"(---.*|_[0-9]+\.json|\.json)$", "", source)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stride", type=int, default=1, help="take every N-th group, case and BFCL entry")
    parser.add_argument("--dialects", default=",".join(DIALECTS), help="comma-separated dialects")
    parser.add_argument("--suites", default=",".join(SUITES), help="comma-separated: " + ", ".join(SUITES))
    args = parser.parse_args(argv)
    dialects = args.dialects.split(",")
    suites = args.suites.split(",")
    unknown = [name for name in suites if name not in SECTIONS] + [name for name in dialects if name not in DIALECTS]
    if unknown:
        parser.error(f"unknown suite or dialect: {', '.join(unknown)}")
    for suite in suites:
        started = time.perf_counter()
        section = SECTIONS[suite](args.stride, dialects)
        command = "python bench/conformance.py" + (f" --stride {args.stride}" if args.stride > 1 else "")
        section.intro = (
            f"{environment()}. `{command}`, {len(dialects)} dialects, {time.perf_counter() - started:.0f} s: {section.intro}"
        )
        write_section(suite, section.markdown(dialects), REPORT)
        print(f"{suite}: {time.perf_counter() - started:.0f} s", flush=True)


def wrapping_note(groups: Sequence[SchemaGroup]) -> list[str]:
    changes, compared = wrapping_changes(groups)
    return [f"Wrapping kept jsonschema's verdict on {compared - len(changes)} of {compared} wrapped instances."] + [
        f"- changed: {change}" for change in changes
    ]


def jsts_section(stride: int, dialects: Sequence[str]) -> Section:
    groups = jsts_groups(optional=True)[::stride]
    rows = list(schema_rows(groups, dialects, jsts_deviation, JSTS_KNOWN_MISSES))
    scope = f"every {stride}th group, " if stride > 1 else ""
    intro = (
        f"{len(groups)} test groups ({scope}required and `optional/`), {len({(r.source, r.group, r.test) for r in rows})} "
        "instances. Each group's schema "
        "is the parameters of one tool `f` (a schema that admits non-objects is wrapped as the single required "
        "parameter `value`, its `#` references rewritten to point into it), compiled with `strict=False` and "
        '`tool_choice="required"`; each instance is rendered in the dialect, checked by the constraint, parsed back '
        "and compared type for type (`constrained.qa.conformance`). Deviations and the causes of known misses are "
        "listed in `tests/corpus.py` (`JSTS_DEVIATIONS`, `JSTS_KNOWN_MISSES`)."
    )
    return Section(
        "JSON-Schema-Test-Suite, draft 2020-12",
        intro,
        rows,
        [("All groups", every), ("Required groups only (not `optional/`)", lambda r: not r.source.startswith("optional/"))],
        ("file", lambda r: r.source),
        wrapping_note(groups),
    )


def maskbench_section(stride: int, dialects: Sequence[str]) -> Section:
    groups = maskbench_groups()[::stride]
    rows = list(schema_rows(groups, dialects, causes=MASKBENCH_KNOWN_MISSES))
    intro = (
        f"{len(groups)} cases{f' (every {stride}th)' if stride > 1 else ''}, "
        f"{len({(r.source, r.test) for r in rows})} instances, judged as the JSON-Schema-Test-Suite groups are."
    )
    return Section("MaskBench", intro, rows, [("All cases", every)], ("family", lambda r: family(r.source)), wrapping_note(groups))


def roundtrip_section(stride: int, dialects: Sequence[str]) -> Section:
    rows = list(roundtrip_rows(stride, dialects))
    facts = bfcl_facts()
    intro = (
        f"BFCL v3 ground-truth calls ({f'every {stride}th entry, ' if stride > 1 else ''}entries whose truth is a "
        "valid call; their functions compiled with the strict object policy) and one call of every MCP corpus tool "
        "(arguments from its schema; its server's tools declared)."
    )
    notes = ["BFCL ground truth that is no valid call (corpus facts, left out): "
             + "; ".join(f"{id}: {kind}" for id, (kind, _) in sorted(facts.items()))]
    return Section("Round trip: BFCL ground truth and MCP tools", intro, rows, [("All calls", every)],
                   ("source", lambda r: r.source), notes)


SECTIONS: dict[str, Callable[[int, Sequence[str]], Section]] = {
    "jsts": jsts_section,
    "maskbench": maskbench_section,
    "roundtrip": roundtrip_section,
}
SUITES = tuple(SECTIONS)


if __name__ == "__main__":
    main()
