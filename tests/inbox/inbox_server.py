"""``hpd-agent inbox`` as a child process of a test, and its event stream read in a thread.

``inbox_server(location, *args)`` yields the URL it serves on; ``Events`` reads ``GET
/inbox/events`` into a list of ``(event, data, time received)`` a test waits on (no sleep:
``wait_for`` wakes on each event read).
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
from _child import serving_child

from hpd_agent.store import open_store

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SERVING = re.compile(r"Serving the inbox on (http://\S+)")


def child_env(**extra: str) -> dict[str, str]:
    """A child's environment: it imports the checkout, tests/ and tests/inbox/ helpers."""
    paths = [str(REPO), str(REPO / "tests"), str(HERE)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "PYTHONUNBUFFERED": "1"}
    env.pop("HPD_AGENT_TOKEN", None)
    return {**env, **extra}


def cli(*args: str) -> list[str]:
    """The ``hpd-agent`` command line of this checkout."""
    return [sys.executable, "-m", "hpd_agent.cli", *args]


def make_store(location: str) -> None:
    """Create the store (an inbox opens an existing store only)."""

    async def create() -> None:
        await open_store(location).aclose()

    anyio.run(create)


@contextmanager
def inbox_server(location: str, *args: str, **env: str) -> Iterator[str]:
    """``hpd-agent inbox --store location`` on a free port; its URL (ending in ``/``)."""
    command = cli("inbox", "--store", location, "--port", "0", *args)
    with serving_child(command, cwd=REPO, env=child_env(**env), serving=SERVING) as (url, _):
        yield url


class Events:
    """``GET /inbox/events`` read in a thread: every event with the time it came."""

    def __init__(self, url: str, query: str = "", headers: dict[str, str] | None = None) -> None:
        self.seen: list[tuple[str, dict[str, Any], float]] = []
        self._cond = threading.Condition()
        self._client = httpx.Client(base_url=url, headers=headers or {}, timeout=None)
        self._response = self._client.send(
            self._client.build_request("GET", f"inbox/events{query}"), stream=True
        )
        assert self._response.status_code == 200, self._response.read()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        event, data = "message", ""
        try:
            for line in self._response.iter_lines():
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: "):
                    data = line[6:]
                elif line == "" and data:
                    with self._cond:
                        self.seen.append((event, json.loads(data), time.time()))
                        self._cond.notify_all()
                    event, data = "message", ""
        except httpx.HTTPError:
            pass  # closed by the test

    def wait_for(
        self, match: Callable[[str, dict[str, Any]], bool], timeout: float = 30
    ) -> tuple[str, dict[str, Any], float]:
        """The first event ``match`` accepts (waiting for it, at most ``timeout`` s)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for seen in self.seen:
                    if match(seen[0], seen[1]):
                        return seen
                left = deadline - time.monotonic()
                assert left > 0, f"no such event within {timeout} s; seen {self.seen}"
                self._cond.wait(left)

    def close(self) -> None:
        self._response.close()
        self._client.close()
