"""The command line, run as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys

from corpus import CORPUS


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "constrained", *args], capture_output=True, text=True, timeout=120)


def test_normalize_prints_frames_and_warnings():
    result = run("normalize", str(CORPUS / "mcp" / "aws-pricing.tools.json"))
    assert result.returncode == 0, result.stderr
    tools = json.loads(result.stdout)
    assert len(tools) == 9
    get_pricing = next(t for t in tools if t["name"] == "get_pricing")
    assert get_pricing["root"]["kind"] == "object"
    assert get_pricing["root"]["required"] == ["service_code"]
    assert get_pricing["warnings"] == []


def test_bad_tools_file_is_a_clear_error(tmp_path):
    path = tmp_path / "tools.json"
    path.write_text(json.dumps([{"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "strnig"}}}}]))
    result = run("normalize", str(path))
    assert result.returncode == 2
    assert "tool 'f'" in result.stderr and "/properties/x" in result.stderr and "strnig" in result.stderr
