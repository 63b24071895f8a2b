"""Start vLLM's OpenAI-compatible server with the plug-in, from Python.

:func:`server_command` is the command line the README gives, and
:class:`VllmServer` runs it on 127.0.0.1 and waits until it answers (the
plug-in's tests and ``bench/vllm_serving.py`` use it).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from ..errors import GenerationError
from ..tokenizers.cache import cache_root
from .tool_parsers import ROUTE_VARIABLE, ROUTES

OFFLINE_ENVIRONMENT = {"HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "2"}
"""No hub access; 2 GiB of KV cache (vLLM-CPU's default takes far more)."""


def plugin_flags(dialect: str = "gemma4") -> list[str]:
    """The four flags that put the plug-in in a server."""
    return [
        "--tool-parser-plugin", "constrained.vllm",
        "--tool-call-parser", f"constrained_{dialect}",
        "--enable-auto-tool-choice",
        "--logits-processors", "constrained.vllm:ToolCallLogitsProcessor",
    ]


def server_command(model: str | os.PathLike[str], flags: Sequence[str], *, port: int = 8000,
                   python: str = "python") -> list[str]:
    """vLLM's server for ``model`` on 127.0.0.1:``port`` with ``flags``
    (:func:`plugin_flags`, or others to compare). ``--enforce-eager``:
    vLLM-CPU has no graph compilation to gain from on a small model;
    ``--dtype float32``: vLLM-CPU would run a float32 model in bfloat16,
    and give other outputs than the library's own loop."""
    return [
        python, "-m", "vllm.entrypoints.launchers.api_server.entry",
        "--model", str(model), "--served-model-name", "default",
        "--host", "127.0.0.1", "--port", str(port),
        "--enforce-eager", "--dtype", "float32", "--max-model-len", "4096", *flags,
    ]


class VllmServer:
    """A vLLM server process for the duration of a ``with`` block (or until
    :meth:`stop`), its output in ``log``. ``route`` sets
    ``CONSTRAINED_VLLM_ROUTE`` for the plug-in."""

    def __init__(self, model: str | os.PathLike[str], flags: Sequence[str], log: str | os.PathLike[str], *,
                 route: str = ROUTES[0], startup_seconds: float = 600) -> None:
        self.model = Path(model)
        self.port = _free_port()
        self.log = Path(log)
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.startup_seconds = startup_seconds
        environment = {"VLLM_CACHE_ROOT": str(cache_root() / "vllm"), **os.environ, **OFFLINE_ENVIRONMENT,
                       ROUTE_VARIABLE: route}
        self._out = self.log.open("w")
        command = server_command(model, flags, port=self.port, python=sys.executable)
        self.process = subprocess.Popen(command, stdout=self._out, stderr=subprocess.STDOUT, env=environment)

    def __enter__(self) -> VllmServer:
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        self.stop()

    def wait_ready(self) -> None:
        """Return when ``/health`` answers; the log's tail says why not."""
        deadline = time.monotonic() + self.startup_seconds
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise GenerationError(f"vLLM exited with {self.process.returncode}:\n{self.tail()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as reply:
                    if reply.status == 200:
                        return
            except OSError:
                pass
            time.sleep(2)
        raise GenerationError(f"vLLM did not answer within {self.startup_seconds:.0f} s:\n{self.tail()}")

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._out.close()

    def client(self) -> Any:
        """An ``openai.OpenAI`` client for this server."""
        from openai import OpenAI

        return OpenAI(base_url=self.base_url, api_key="none", max_retries=0, timeout=600)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
