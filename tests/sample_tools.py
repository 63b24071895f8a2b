"""Small hand-written tools, and a helper, shared by several test modules."""

from __future__ import annotations

import json

from constrained.dialects import DIALECTS


def reads_cut_off_call(dialect: str, prefix: str) -> bool:
    """Whether ``prefix`` ends in a call cut off before its closing marker
    that the dialect reads anyway (hermes: a whole JSON object after the
    last ``<tool_call>``)."""
    chosen = DIALECTS[dialect]
    start = prefix.rfind(chosen.call_open)
    if not chosen.reads_cut_off_call or start < 0 or chosen.call_close in prefix[start:]:
        return False
    try:
        json.loads(prefix[start + len(chosen.call_open) :])
    except ValueError:
        return False
    return True

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
            "required": ["city"],
        },
    },
}
