"""Fixtures every test shares."""

from __future__ import annotations

import pytest

from constrained.output import parse


@pytest.fixture(autouse=True)
def one_salt_for_call_ids(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Call ids are random per output (see ``CallIds``), so that they never
    repeat across outputs. Tests compare a stream's result with a parse of
    the same text call for call, ids included; they share one salt here.
    A test marked ``random_call_ids`` gets the real, random ones."""
    if request.node.get_closest_marker("random_call_ids") is None:
        monkeypatch.setattr(parse, "_new_salt", lambda: "one salt for every output in the tests")
