"""Fixtures every test shares."""

from __future__ import annotations

import os
import sys

import pytest

from constrained.output import parse

# One torch thread per test process. The suite runs one process per core,
# and masks are applied to one or a few rows: a thread pool per process
# only adds synchronization, and its waiting threads made one test 40x
# slower (387 s against 10 s) on a busy 2-core machine. Set before any
# test imports torch; the code blocks of the docs run in subprocesses and
# inherit it.
os.environ.setdefault("OMP_NUM_THREADS", "1")
if "torch" in sys.modules:
    sys.modules["torch"].set_num_threads(1)


@pytest.fixture(autouse=True)
def one_salt_for_call_ids(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Call ids are random per output (see ``CallIds``), so that they never
    repeat across outputs. Tests compare a stream's result with a parse of
    the same text call for call, ids included; they share one salt here.
    A test marked ``random_call_ids`` gets the real, random ones."""
    if request.node.get_closest_marker("random_call_ids") is None:
        monkeypatch.setattr(parse, "_new_salt", lambda: "one salt for every output in the tests")
