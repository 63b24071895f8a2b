"""Where a sequence stands in the calls of a dialect whose arguments are one
JSON value in the call's markup (hermes), so the mask cache can key the
arguments by their skeleton (:mod:`.json_walk`)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from ..dialects import get_dialect
from ..dialects.base import Markers
from ..grammar.syntax import WalkShape
from .json_frames import walk_shape
from .json_walk import MARKUP_LIMIT, JsonWalk, WalkMemo, WalkSnapshot

if TYPE_CHECKING:
    from ..compiler import CompiledTools


class ArgumentsSnapshot(NamedTuple):
    """Where an :class:`ArgumentsTracker` stood, for rollback."""

    markup: bytes | None
    walk: JsonWalk | None
    walked: WalkSnapshot | None


class ArgumentsTracker:
    """Follows one sequence through the calls of a dialect whose arguments
    are one JSON value in the call's markup (``arguments_opening``), with a
    :class:`JsonWalk` through each call's arguments, from the call's
    opening token to its closing one."""

    def __init__(self, opening: re.Pattern[bytes], open_id: int, close_id: int | None, table: list[bytes],
                 walks: Callable[[str], JsonWalk | None]) -> None:
        self._opening = opening
        self._open_id = open_id
        self._close_id = close_id
        self._table = table
        self._walks = walks
        self._markup: bytes | None = None  # the call's markup so far, until its arguments begin
        self._walk: JsonWalk | None = None

    @property
    def walk(self) -> JsonWalk | None:
        """The walk through the open call's arguments, once they began."""
        return self._walk

    def snapshot(self) -> ArgumentsSnapshot:
        return ArgumentsSnapshot(self._markup, self._walk, self._walk.snapshot() if self._walk is not None else None)

    def restore(self, snapshot: ArgumentsSnapshot) -> None:
        self._markup, self._walk, walked = snapshot
        if self._walk is not None:
            assert walked is not None
            self._walk.restore(walked)

    def feed(self, token: int) -> None:
        """Advance past ``token``, which the grammar accepted."""
        if token == self._open_id:
            self._markup, self._walk = b"", None
            return
        if token == self._close_id:
            self._markup, self._walk = None, None
            return
        data = self._table[token]
        if self._walk is not None:
            self._walk.feed(data, token)
            return
        if self._markup is None:
            return
        markup = self._markup + data
        match = self._opening.match(markup)  # the opening, where the markup has it whole
        if match is None:
            self._markup = markup if len(markup) <= MARKUP_LIMIT else None
            return
        self._markup = None
        named = match.groupdict()
        self._walk = self._walks(named["name"].decode("utf-8", "replace") if named.get("name") else json.loads(named["tool"]))
        if self._walk is not None:
            self._walk.feed(markup[match.end() :])


def arguments_trackers(compiled: CompiledTools, count: int, memo: WalkMemo) -> list[ArgumentsTracker] | None:
    """One tracker per sequence for ``compiled``, or None when its dialect
    does not write its arguments as one JSON value (or writes its call
    opening as text, or the walk cannot follow its values: :func:`.walk_shape`)."""
    tok = compiled.tokenizer
    dialect = get_dialect(compiled.dialect)
    opening = dialect.markup.arguments_opening
    shape = walk_shape(compiled)
    if opening is None or not Markers(tok).is_token(dialect.markup.open) or not compiled.tools \
            or not isinstance(shape, WalkShape):
        return None
    tools = {tool.name: tool for tool in compiled.tools}

    def walks(name: str) -> JsonWalk | None:
        tool = tools.get(name)
        return None if tool is None else JsonWalk(tool.root, tool.schema.definitions, memo, shape)

    open_id = tok.token_id(dialect.markup.open)
    assert open_id is not None
    close_id = tok.token_id(dialect.markup.close)
    return [ArgumentsTracker(opening, open_id, close_id, tok.token_table[0], walks) for _ in range(count)]
