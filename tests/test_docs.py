"""The manual's code runs as shown, and the product carries no development
history.

Code blocks. Every fenced block of README.md and docs/*.md whose info
string starts with ``python``, ``sh`` or ``bash`` is run, from the project
root, in a subprocess:

- ``python`` blocks are self-contained: each runs on its own, as a file.
  A block whose info string is ``python continued`` runs after the blocks
  before it in the same file (they are joined into one program).
- ``sh``/``bash`` blocks run under ``bash -e -o pipefail`` in a fresh
  temporary folder that holds a link to ``examples/`` (so what a command
  writes, such as ``constrained export-model``'s folder, is thrown away).
  Lines ending in a backslash are joined first. Each command is split at
  ``&&``, and these steps are left out, by rule:
  ``pip ...`` (installing: the install lines are what ``.ci/run`` runs in a
  fresh environment), ``python -m pytest ...`` (the test suite itself,
  which ``.ci/run`` runs), and launching a vLLM server
  (``python -m vllm.entrypoints...`` or ``vllm serve``: ``tests_vllm/``
  starts that command and checks it against the launcher), and launching
  an SGLang server (``python -m sglang.launch_server``: ``tests_sglang/``
  passes its flags to SGLang's own argument parser). The rest of the
  command runs.
- A block whose info string holds ``notest`` is not run; the page says
  why (the notes on third-party APIs in docs/llguidance-notes.md, a client
  of a running vLLM server in docs/vllm.md). A ``python notest`` block is
  still compiled, so it is at least valid Python (except in the notes,
  which list signatures).
  Output blocks (``json``, ``text``, no language) are never run.
- A ``python`` block that runs the model's forward pass itself (a decoding
  loop of one's own: it calls ``mask_logits``) runs with
  ``-W error::FutureWarning`` and must write no deprecation notice: what a
  reader copies must not lean on an argument transformers deprecated (its
  forward's ``past_key_values``, renamed ``cache`` in transformers 5.24).

Blocks that load the embedded model run too; the model is converted once
and cached, so only the first load is slow.

Process talk. No product file holds issue numbers, machine paths or
work-session talk; that history belongs in CHANGELOG.md, which is not
checked.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^```(\S*)[ \t]*(.*)$")
RUN_LANGS = {"python", "sh", "bash"}
SKIPPED_STEP = re.compile(
    r"""^(?:pip\s                                   # installing
         |python\s+-m\s+pytest\b                    # the test suite itself
         |(?:\w+=\S*\s+)*python\s+-m\s+vllm\.entrypoints\b   # a vLLM server launch
         |(?:\w+=\S*\s+)*vllm\s+serve\b
         |(?:\w+=\S*\s+)*python\s+-m\s+sglang\.launch_server\b)   # an SGLang server launch""",
    re.VERBOSE,
)
TIMEOUT_S = 240
OWN_LOOP = "mask_logits("
STRICT_WARNINGS = ("-W", "error::FutureWarning")


def code_blocks(path: Path) -> list[tuple[int, str, set[str], str]]:
    """(line, language, flags, code) of each fenced block of ``path``."""
    blocks = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if match is None:
            i += 1
            continue
        lang, flags, start = match.group(1), set(match.group(2).split()), i + 1
        body = []
        i += 1
        while i < len(lines) and lines[i].rstrip() != "```":
            body.append(lines[i])
            i += 1
        if i == len(lines):
            raise AssertionError(f"{path.name}:{start}: code block never closed")
        blocks.append((start, lang, flags, "\n".join(body) + "\n"))
        i += 1
    return blocks


def runnable_blocks() -> list[tuple[str, str, str]]:
    """(test id, language, code) of each block to run, continuations joined."""
    out = []
    for path in DOC_FILES:
        rel = path.relative_to(ROOT).as_posix()
        program = ""
        for line, lang, flags, code in code_blocks(path):
            if lang not in RUN_LANGS or "notest" in flags:
                continue
            if lang == "python":
                program = program + code if "continued" in flags else code
                out.append((f"{rel}:{line}", lang, program))
            else:
                out.append((f"{rel}:{line}", lang, code))
    return out


def shell_script(code: str) -> str:
    """The block's commands without the install, test-suite and server steps."""
    joined = re.sub(r"\\\n\s*", " ", code)
    kept = []
    for line in joined.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        steps = [step.strip() for step in stripped.split("&&")]
        steps = [step for step in steps if not SKIPPED_STEP.match(step)]
        if steps:
            kept.append(" && ".join(steps))
    return "\n".join(kept) + "\n"


def python_flags(code: str) -> tuple[str, ...]:
    """The interpreter's flags for a ``python`` block: FutureWarning is an
    error in a decoding loop of one's own."""
    return STRICT_WARNINGS if OWN_LOOP in code else ()


def run_block(lang: str, code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1"}
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    with tempfile.TemporaryDirectory(prefix="constrained-docs-") as tmp:
        if lang == "python":
            script = Path(tmp) / "block.py"
            script.write_text(code, encoding="utf-8")
            return subprocess.run(
                [sys.executable, *python_flags(code), str(script)], cwd=ROOT, env=env, capture_output=True, text=True,
                timeout=TIMEOUT_S,
            )
        (Path(tmp) / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
        return subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", shell_script(code)],
            cwd=tmp,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )


BLOCKS = runnable_blocks()


def test_the_manual_has_code_to_run() -> None:
    ids = [block_id for block_id, _, _ in BLOCKS]
    assert sum(i.startswith("README.md:") for i in ids) >= 4
    assert any(i.startswith("docs/") for i in ids)


@pytest.mark.slow
@pytest.mark.parametrize(("block_id", "lang", "code"), BLOCKS, ids=[b[0] for b in BLOCKS])
def test_code_block_runs_as_shown(block_id: str, lang: str, code: str) -> None:
    done = run_block(lang, code)
    assert done.returncode == 0, (
        f"{block_id} ({lang}) exited {done.returncode}\n--- code ---\n{code}"
        f"--- stdout ---\n{done.stdout[-4000:]}\n--- stderr ---\n{done.stderr[-4000:]}"
    )
    if lang == "python" and python_flags(code):
        # transformers also says some deprecations through its logger, which -W does not reach
        assert "deprecated" not in done.stderr.lower(), f"{block_id} wrote a deprecation notice:\n{done.stderr[-4000:]}"


def test_own_loops_run_with_future_warnings_as_errors() -> None:
    """The README's and docs/generation.md's decoding loops are the blocks
    held to no FutureWarning; the flag does turn one into a failure."""
    strict = [block_id for block_id, lang, code in BLOCKS if lang == "python" and python_flags(code)]
    assert {i.split(":")[0] for i in strict} == {"README.md", "docs/generation.md"}, strict
    done = run_block("python", f"import warnings\nwarnings.warn('old', FutureWarning)  # {OWN_LOOP}\n")
    assert done.returncode != 0 and "FutureWarning: old" in done.stderr, done.stderr


def test_blocks_not_run_are_valid_python() -> None:
    """``python notest`` blocks (a client of a running server, llama.cpp's
    API) compile, and the vLLM client request is one of them. The notes on
    third-party APIs list signatures, not programs."""
    skipped = {
        f"{path.relative_to(ROOT).as_posix()}:{line}": code
        for path in DOC_FILES
        if path.name != "llguidance-notes.md"
        for line, lang, flags, code in code_blocks(path)
        if lang == "python" and "notest" in flags
    }
    for block_id, code in skipped.items():
        compile(code, block_id, "exec")
    clients = [i for i, code in skipped.items() if i.startswith("docs/vllm.md:") and "chat.completions.create(" in code]
    assert len(clients) == 1, sorted(skipped)
    assert all(word in skipped[clients[0]] for word in ("tools=", "tool_choice=", ".tool_calls")), clients


def test_skip_rule() -> None:
    script = shell_script(
        "pip install torch==2.13.0 && pip install -e '.[model]' && constrained generate x --prompt p\n"
        "pip install -e '.[test]' && python -m pytest\n"
        "HF_HUB_OFFLINE=1 A=2 python -m vllm.entrypoints.x \\\n  --model m\n"
        "pip uninstall -y a && constrained parse t --dialect hermes -\n"
    )
    assert script == "constrained generate x --prompt p\nconstrained parse t --dialect hermes -\n"


# --- process talk ---------------------------------------------------------

PRODUCT_GLOBS = [
    "README.md",
    "docs/*.md",
    "bench/*.md",
    "bench/*.py",
    "examples/**/*",
    "tests/*.py",
    "tests/README.md",
    "tests_vllm/**/*",
    "constrained/**/*.py",
    "grammars/*",
]
# History belongs in CHANGELOG.md; this file holds the patterns' own examples.
NOT_PRODUCT = {"CHANGELOG.md", "tests/test_docs.py"}

PROCESS_TALK = [
    # an issue number: "issue 18", "(issue 7)", "## Issue 18", "issue #5", "issue18_summary"
    ("issue number", re.compile(r"\bissues?[ _#]*\d", re.IGNORECASE)),
    # a machine path: /tmp/... or /work/... (not "network/" or "a/tmp/b")
    ("machine path", re.compile(r"(?<![\w.~-])/(?:tmp|work)/")),
    # a work session, not an HTTP or pytest session
    (
        "work session",
        re.compile(
            r"\b(?:work|working|development|dev|coding|helper|agent|earlier|previous|prior|this|last|next|"
            r"first|later|same|another)[ -]sessions?\b|\bsessions?[ #]\d",
            re.IGNORECASE,
        ),
    ),
]
# Text that matches a pattern but is not process talk: (file, exact text).
ALLOWED = {
    ("tests/test_parse_robustness.py", '"/tmp/a.py"'),  # a tool call's path argument, test data
}


def product_files() -> list[Path]:
    files: set[Path] = set()
    for pattern in PRODUCT_GLOBS:
        files.update(p for p in ROOT.glob(pattern) if p.is_file() and "__pycache__" not in p.parts)
    return sorted(
        p
        for p in files
        if p.relative_to(ROOT).as_posix() not in NOT_PRODUCT and p.suffix not in {".png", ".pyc"}
    )


def process_talk(path: Path) -> list[str]:
    rel = path.relative_to(ROOT).as_posix()
    text = path.read_text(encoding="utf-8", errors="replace")
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for kind, pattern in PROCESS_TALK:
            for match in pattern.finditer(line):
                if any(rel == f and allowed in line for f, allowed in ALLOWED):
                    continue
                found.append(f"{rel}:{number}: {kind}: {match.group(0)!r} in {line.strip()[:120]!r}")
    return found


def test_no_process_talk_in_the_product() -> None:
    files = product_files()
    assert ROOT / "README.md" in files and ROOT / "bench" / "RESULTS.md" in files
    found = [hit for path in files for hit in process_talk(path)]
    assert not found, "process talk belongs in CHANGELOG.md:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("text", "talk"),
    [
        ("## Issue 18: the targets", True),
        ("measured before issue 18", True),
        ("random walks (issue 7)", True),
        ("see issue #12", True),
        ("<!-- issue18_summary -->", True),
        ("venv at /tmp/xgvenv", True),
        ("cd /work/main", True),
        ("during the first development session", True),
        ("in this session we", True),
        ("session 3 measured", True),
        ("an issue with the parser", False),
        ("started once per session", False),
        ('@pytest.fixture(scope="session")', False),
        ("aiohttp.ClientSession()", False),
        ("network/tmp/x and ~/work/ and ./tmp/", False),
        ("tissue 5", False),
    ],
)
def test_process_talk_patterns(text: str, talk: bool) -> None:
    assert any(pattern.search(text) for _, pattern in PROCESS_TALK) is talk
