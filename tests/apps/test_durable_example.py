"""Every path ``examples/durable_run.py`` and the docs describe, walked as a user types it:
the script, ``hpd-agent pending``/``answer``/``resume``, each a real process."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "durable_run.py"
DONE = "Done: scaffolded api, using FastAPI"


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "HPD_AGENT_ALLOW_MODEL_REQUESTS": "0"}


def _run(cwd: Path, *command: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        list(command), cwd=cwd, env=_env(), capture_output=True, text=True, timeout=120
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


def script(cwd: Path, *args: str, path: Path = EXAMPLE) -> subprocess.CompletedProcess[str]:
    return _run(cwd, sys.executable, str(path), *args)


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return _run(cwd, str(Path(sys.executable).parent / "hpd-agent"), *args)


def _start(cwd: Path, path: Path = EXAMPLE) -> str:
    first = script(cwd, path=path)
    assert first.returncode == 0, first.stderr
    assert first.stdout.count("[side effect]") == 1 and "interrupted: req_" in first.stdout
    listed = cli(cwd, "pending", "--store", "durable.db")
    assert listed.returncode == 0, listed.stderr
    line, prompt = listed.stdout.splitlines()
    assert line.endswith("Orchestrator > CodingAgent  Which web framework?  1. Express  2. FastAPI")
    assert prompt == (
        "    Choose one: type a number from 1 to 2 (as listed: 1 is the first) or the value"
    )
    return line.split()[0]


def test_answer_with_the_cli_then_run_again(tmp_path: Path) -> None:
    rid = _start(tmp_path)
    waiting = script(tmp_path)  # not answered yet: says so, does nothing twice
    assert waiting.returncode == 0 and "[side effect]" not in waiting.stdout
    assert f"interrupted: {rid} waits for an answer" in waiting.stdout
    answered = cli(tmp_path, "answer", rid, "2", "--db", "durable.db")
    assert answered.returncode == 0 and answered.stdout.strip() == f'answered {rid}: "FastAPI"'
    again = script(tmp_path)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == DONE
    assert list(tmp_path.iterdir()) == []  # done: the store is removed, the next run starts over
    _start(tmp_path)


def test_an_answer_on_the_command_line_after_the_cli_answered(tmp_path: Path) -> None:
    rid = _start(tmp_path)
    assert cli(tmp_path, "answer", rid, "FastAPI", "--db", "durable.db").returncode == 0
    again = script(tmp_path, "Express")  # once a ValueError: not enough values to unpack
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == DONE and "answered already" in again.stderr


def test_an_answer_by_number_or_a_wrong_one_on_the_command_line(tmp_path: Path) -> None:
    _start(tmp_path)
    wrong = script(tmp_path, "Django")
    assert wrong.returncode == 1 and "not one of the options" in wrong.stderr
    done = script(tmp_path, "2")
    assert done.returncode == 0 and done.stdout.strip() == DONE


def test_resume_with_the_cli_finds_the_agent_in_the_script(tmp_path: Path) -> None:
    rid = _start(tmp_path)
    done = cli(tmp_path, "resume", "run_example", "--db", "durable.db", "--answer", f"{rid}=2")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == DONE
    again = script(tmp_path)  # the run was completed elsewhere: shown, then cleaned up
    assert again.returncode == 0 and again.stdout.strip() == DONE
    assert list(tmp_path.iterdir()) == []


def test_resume_says_which_agent_to_pass_when_the_script_is_gone(tmp_path: Path) -> None:
    copy = tmp_path / "mine" / "durable_run.py"
    copy.parent.mkdir()
    shutil.copy(EXAMPLE, copy)
    work = tmp_path / "work"
    work.mkdir()
    rid = _start(work, path=copy)
    copy.unlink()
    lost = cli(work, "resume", "run_example", "--db", "durable.db", "--interrupt")
    assert lost.returncode == 10
    assert lost.stderr.splitlines() == [
        f"error: cannot load the agent the run recorded, {copy}:agent: ImportError: no script "
        f"{copy}; pass --agent path/to/script.py:NAME (the script that started the run) or "
        "--agent package.module:NAME, where NAME is the global holding the root Agent or a "
        "function returning it"
    ]
    shutil.copy(EXAMPLE, work / "moved.py")
    moved = cli(
        work, "resume", "run_example", "--db", "durable.db", "--agent", "moved.py:agent",
        "--answer", f"{rid}=FastAPI",
    )  # fmt: skip
    assert moved.returncode == 10 and "belongs to agent" in moved.stderr  # a run keeps its agent
