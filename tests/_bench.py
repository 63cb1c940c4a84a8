"""Running a benchmark script as a smoke test: tiny sizes, behaviour not timing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def bench_result(*command: str, timeout: float = 240) -> dict[str, Any]:
    """Run ``python *command`` in the checkout; it must succeed, and its first
    ``RESULT_JSON`` line is the result."""
    done = subprocess.run(
        [sys.executable, *command], cwd=REPO, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, done.stdout + done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT_JSON "))
    return json.loads(line.removeprefix("RESULT_JSON "))
