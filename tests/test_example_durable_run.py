"""``examples/durable_run.py`` works as its docstring says: stop, survive, resume once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "durable_run.py"), *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_durable_example_stops_then_resumes_without_repeating_side_effects(tmp_path: Path) -> None:
    first = _run(tmp_path)
    assert first.count("[side effect]") == 1
    assert "interrupted: req_" in first
    second = _run(tmp_path, "fastapi")
    assert "[side effect]" not in second
    assert second.strip() == "Done: scaffolded api, using FastAPI"
