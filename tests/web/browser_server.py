"""A real ``hpd-agent serve`` subprocess for the browser tests, and where Chromium is.

Importing it skips the importing test module on a machine without Playwright, Chromium or
the web extra (a browser test module imports it before Playwright). The ``browser`` fixture
(conftest.py) launches Chromium once per module.
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless=new",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

try:
    from playwright.sync_api import expect
except ImportError:  # pragma: no cover - depends on the machine
    pytest.skip("playwright is not installed (pip install -e '.[dev]')", allow_module_level=True)
if not os.path.exists(CHROMIUM):  # pragma: no cover - depends on the machine
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)", allow_module_level=True)
try:
    from hpd_agent.web import create_app  # noqa: F401  # pyright: ignore[reportUnusedImport]
except ImportError as exc:  # pragma: no cover - depends on the machine
    pytest.skip(f"the web extra is not installed: {exc}", allow_module_level=True)

expect.set_options(timeout=30_000)
ROOT = Path(__file__).resolve().parents[2]
SERVING = re.compile(r"Serving .* on (http://\S+)")


class Server:
    """``hpd-agent serve`` in a subprocess; ``url`` once it printed where it listens."""

    def __init__(
        self, store: Path, *extra: str, agent: str = "tests.web.browser_agents:root"
    ) -> None:
        exe = shutil.which("hpd-agent", path=str(Path(sys.executable).parent))
        command = [exe] if exe else [sys.executable, "-m", "hpd_agent.cli"]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        # The checked-out package, not whichever one the console script was installed from.
        # The test helpers by their own names too (``rating_kind``), as the tests import them.
        paths = [str(ROOT), str(ROOT / "tests"), env.get("PYTHONPATH")]
        env["PYTHONPATH"] = os.pathsep.join(filter(None, paths))
        env.pop("HPD_AGENT_TOKEN", None)
        self.store = store
        self.proc = subprocess.Popen(
            [
                *command,
                "serve",
                agent,
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--store",
                str(store),
                *extra,
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.output: list[str] = []
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, args=(lines,), daemon=True).start()
        self.url = self._wait_for_url(lines)

    def _pump(self, lines: queue.Queue[str | None]) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line)
            lines.put(line)
        lines.put(None)

    def _wait_for_url(self, lines: queue.Queue[str | None]) -> str:
        while True:
            try:
                line = lines.get(timeout=60)
            except queue.Empty:
                self.stop()
                raise AssertionError(
                    "hpd-agent serve did not say where it listens within 60 s"
                ) from None
            if line is None:
                raise AssertionError("hpd-agent serve exited:\n" + "".join(self.output))
            found = SERVING.search(line)
            if found:
                return found.group(1).rstrip("/") + "/"

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
