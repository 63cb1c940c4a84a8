"""``hpd-agent run MODULE:ATTR PROMPT --store URL``, run as a real process on a real SQLite file
and a private PostgreSQL server: its questions wait in the store and another process answers
them (``hpd_agent.store.respond``, ``hpd-agent answer``); ``--interrupt`` leaves them for
``hpd-agent resume``; Ctrl-C leaves the run resumable. Model calls and tool side effects are
counted in files (``durable_agents``): nothing runs twice."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import durable_agents
import pytest
from _pg import fresh_postgres, postgres_dsn  # noqa: F401  (fixtures)

from hpd_agent.store import RunRecord, open_store

ROOT = Path(__file__).resolve().parents[2]
TESTS = Path(__file__).resolve().parents[1]
AGENT = "durable_agents:build"
PROMPT = "Build an API"
WAITING = re.compile(r"hpd-agent answer (req_\w+) (?:TEXT|yes\|run\|always\|no) --db")
LIMIT = 120.0
"""Seconds a child may take at most (a bound for a broken build, never waited out)."""


def _env(workdir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HPD_AGENT_DEBUG")}
    return {
        **env,
        "HPD_TEST_DIR": str(workdir),
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS), str(TESTS / "a2a")]),
        "HPD_A2A_TEST_DIR": str(workdir),
        "HPD_AGENT_ALLOW_MODEL_REQUESTS": "0",
    }


def _hpd(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hpd_agent.cli", *args],
        env=_env(workdir),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=LIMIT,
    )


class _Running:
    """``hpd-agent run`` in a child process, its stderr read line by line in a thread."""

    def __init__(self, workdir: Path, *args: str) -> None:
        # stdin a pipe nobody writes: a read of it would block the run, never end it.
        self.process = subprocess.Popen(
            [sys.executable, "-m", "hpd_agent.cli", "run", *args],
            env=_env(workdir),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.err: list[str] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self._lines.put(line)
        self._lines.put(None)

    def request_id(self) -> str:
        """The request id of the next question shown waiting (read from stderr)."""
        while True:
            line = self._lines.get(timeout=LIMIT)
            assert line is not None, f"ended before asking: {''.join(self.err)}"
            self.err.append(line)
            found = WAITING.search(line)
            if found:
                return found.group(1)

    def end(self) -> tuple[int, str, str]:
        """Its exit status, stdout and the rest of its stderr once it has ended."""
        assert self.process.stdout is not None
        out = self.process.stdout.read()  # stderr is the thread's alone (not communicate())
        self.process.wait(timeout=LIMIT)
        while (line := self._lines.get(timeout=LIMIT)) is not None:
            self.err.append(line)
        return self.process.returncode, out, "".join(self.err)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HPD_TEST_DIR", str(tmp_path))
    return tmp_path


@pytest.fixture(params=["sqlite", "postgres"])
def location(request: pytest.FixtureRequest, workdir: Path) -> str:
    """Where the runs are kept: a SQLite file, or the private PostgreSQL server."""
    if request.param == "sqlite":
        return str(workdir / "runs.db")
    return str(request.getfixturevalue("fresh_postgres"))


@pytest.fixture
def running(workdir: Path) -> Iterator[list[_Running]]:
    started: list[_Running] = []
    yield started
    for child in started:
        child.stop()


def _respond(workdir: Path, location: str, request_id: str, answer: str) -> None:
    """Answer from another process, as a script of the team does: ``store.respond``."""
    code = (
        "import anyio, sys\n"
        "from hpd_agent.store import open_store, respond\n"
        "async def main():\n"
        "    store = open_store(sys.argv[1])\n"
        "    try:\n"
        "        await respond(store, sys.argv[2], sys.argv[3])\n"
        "    finally:\n"
        "        await store.aclose()\n"
        "anyio.run(main)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, location, request_id, answer],
        env=_env(workdir),
        capture_output=True,
        text=True,
        timeout=LIMIT,
    )
    assert done.returncode == 0, done.stderr


def _ran_once() -> None:
    assert durable_agents.read_lines("side_effects.txt") == ["scaffolded"]
    assert durable_agents.read_lines("calls.txt") == durable_agents.EVERY_TURN


@pytest.mark.parametrize("answerer", ["respond", "cli"])
def test_run_waits_for_an_answer_from_another_process(
    workdir: Path, location: str, running: list[_Running], answerer: str
) -> None:
    child = _Running(workdir, AGENT, PROMPT, "--store", location, "--run-id", "run_cron")
    running.append(child)
    rid = child.request_id()
    if answerer == "respond":
        _respond(workdir, location, rid, "Falcon")
    else:
        answered = _hpd(workdir, "answer", rid, "Falcon", "--db", location)
        assert answered.returncode == 0, answered.stderr
    status, out, err = child.end()
    assert status == 0, err
    assert out == "Orchestrator: built with Falcon\n"  # the final output alone on stdout
    assert f'{rid} answered: "Falcon"' in err and "Traceback" not in err
    _ran_once()
    record = anyio.run(_run_record, location, "run_cron")
    assert (record.status, record.agent_ref) == ("completed", AGENT)


async def _run_record(location: str, run_id: str) -> RunRecord:
    store = open_store(location)
    try:
        record = await store.get_run(run_id)
    finally:
        await store.aclose()
    assert record is not None
    return record


def test_run_interrupt_leaves_the_questions_for_resume(workdir: Path, location: str) -> None:
    stopped = _hpd(workdir, "run", AGENT, PROMPT, "--store", location, "--interrupt")
    assert stopped.returncode == 75, stopped.stderr  # EX_TEMPFAIL: not an error
    (line,) = stopped.stdout.splitlines()
    rid = line.removeprefix("pending ").removesuffix(f": {durable_agents.QUESTION}")
    assert line == f"pending {rid}: {durable_agents.QUESTION}"
    run_id = re.findall(r"hpd-agent resume (run_\w+) --db", stopped.stderr)[-1]
    # Nothing waits any more: the question is in the store, for anyone to answer.
    answered = _hpd(workdir, "answer", rid, "Hanami", "--db", location)
    assert answered.returncode == 0, answered.stderr
    # The run recorded MODULE:ATTR: resume needs no --agent.
    done = _hpd(workdir, "resume", run_id, "--db", location)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Orchestrator: built with Hanami\n"
    _ran_once()


def test_ctrl_c_leaves_the_run_resumable_and_run_id_continues_it(
    workdir: Path, running: list[_Running]
) -> None:
    db = str(workdir / "runs.db")
    args = (AGENT, PROMPT, "--store", db, "--run-id", "run_nightly")
    child = _Running(workdir, *args)
    running.append(child)
    rid = child.request_id()
    # While it waits, the same command line elsewhere is refused: this process drives it.
    twice = _hpd(workdir, "run", *args)
    assert twice.returncode == 13
    (line,) = twice.stderr.splitlines()
    assert line.startswith("error: run 'run_nightly' is being driven by another process")
    child.process.send_signal(signal.SIGINT)
    status, out, err = child.end()
    assert status == 130 and out == "" and "Traceback" not in err, err
    assert err.splitlines()[-1] == (
        "interrupted (Ctrl-C): run run_nightly stays in the store; continue it with "
        f"hpd-agent resume run_nightly --db {db}"
    )
    # The same command line again continues the run where it stopped: the question it
    # asked is shown waiting again, under the same id, and nothing before it runs again.
    again = _Running(workdir, *args)
    running.append(again)
    assert again.request_id() == rid
    _respond(workdir, db, rid, "Flask")
    status, out, err = again.end()
    assert status == 0, err
    assert out == "Orchestrator: built with Flask\n"
    _ran_once()


def test_run_refuses_bad_input_in_one_line(workdir: Path) -> None:
    db = str(workdir / "runs.db")
    done = _hpd(workdir, "run", AGENT, PROMPT, "--store", db, "--run-id", "run_done", "--interrupt")
    assert done.returncode == 75
    rid = done.stdout.split()[1].rstrip(":")
    assert _hpd(workdir, "answer", rid, "Hanami", "--db", db).returncode == 0
    assert _hpd(workdir, "resume", "run_done", "--db", db).returncode == 0
    cases: list[tuple[tuple[str, ...], int, str]] = [
        (("durable_agents:nothing", PROMPT, "--store", db), 10, "run: cannot load MODULE:ATTR"),
        (("no_such_module:agent", PROMPT, "--store", db), 10, "run: cannot load MODULE:ATTR"),
        (("durable_agents", PROMPT, "--store", db), 10, "run MODULE:ATTR"),
        ((AGENT, PROMPT, "--store", "nope://x"), 8, "no store is registered for nope://"),
        ((AGENT, PROMPT, "--store", str(workdir / "no" / "x.db")), 8, "does not exist"),
        ((AGENT, "  ", "--store", db), 2, "PROMPT is empty"),
        ((AGENT, PROMPT, "--store", db, "--run-id", "run_done"), 2, "already ended (completed)"),
        ((AGENT, "Other", "--store", db, "--run-id", "run_interrupted"), 2, "another prompt"),
        (
            ("durable_agents:other_agent", PROMPT, "--store", db, "--run-id", "run_interrupted"),
            10,
            "started by agent 'Orchestrator', not 'Somebody'",
        ),
    ]
    stopped = _hpd(
        workdir, "run", AGENT, PROMPT, "--store", db, "--run-id", "run_interrupted", "--interrupt"
    )
    assert stopped.returncode == 75

    def run(args: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
        return _hpd(workdir, "run", *args)

    with ThreadPoolExecutor(4) as pool:  # independent processes: side by side
        done = list(pool.map(run, [c[0] for c in cases]))
    for (args, status, words), refused in zip(cases, done, strict=True):
        assert refused.returncode == status, (args, refused.stderr)
        (line,) = refused.stderr.splitlines()
        assert line.startswith("error: ") and words in line, (args, line)
    # The refusals changed nothing: the interrupted run is still there to continue.
    assert durable_agents.read_lines("side_effects.txt") == ["scaffolded", "scaffolded"]
    record = anyio.run(_run_record, db, "run_interrupted")
    assert record.status == "interrupted"


def test_run_remembers_an_always_answer_and_a_later_run_is_approved_by_its_grant(
    workdir: Path, running: list[_Running]
) -> None:
    db = str(workdir / "runs.db")
    child = _Running(workdir, "a2a_served_agents:asker", "permission", "--store", db)
    running.append(child)
    rid = child.request_id()
    answered = _hpd(workdir, "answer", rid, "always", "--db", db)
    assert answered.returncode == 0, answered.stderr
    status, _, err = child.end()
    assert status == 0 and f"{rid} approved (always)" in err, err
    # The next run is not asked: one line names the grant, and the run goes to its end.
    again = _hpd(workdir, "run", "a2a_served_agents:asker", "permission", "--store", db)
    assert again.returncode == 0, again.stderr
    assert again.stdout == "answer: deployed to prod\n"
    listed = _hpd(workdir, "grants", "list", "--store", db, "--json")
    [grant] = json.loads(listed.stdout)
    assert f"runs deploy: approved by grant {grant['grant_id']}" in again.stderr
    assert "hpd-agent answer" not in again.stderr
    assert (workdir / "effect.txt").read_text() == "deploy prod\ndeploy prod\n"


def test_run_shows_a_permission_and_parallel_questions_with_their_answer_lines(
    workdir: Path, running: list[_Running]
) -> None:
    db = str(workdir / "runs.db")
    child = _Running(workdir, "a2a_served_agents:asker", "permission", "--store", db)
    running.append(child)
    rid = child.request_id()
    assert "Asker wants to run deploy" in "".join(child.err)
    assert f"hpd-agent answer {rid} yes|run|always|no --db {db}" in child.err[-1]
    answered = _hpd(workdir, "answer", rid, "yes", "--db", db)
    assert answered.returncode == 0, answered.stderr
    status, out, err = child.end()
    assert status == 0, err
    assert out == "answer: deployed to prod\n"
    assert f"{rid} approved (once)" in err
    assert (workdir / "effect.txt").read_text() == "deploy prod\n"
    # Two sub-agents ask at once: --interrupt lists both, and resume goes on from both answers.
    stopped = _hpd(workdir, "run", "a2a_served_agents:lead", "Go", "--store", db, "--interrupt")
    assert stopped.returncode == 75, stopped.stderr
    pending = dict(line.split(": ", 1) for line in stopped.stdout.splitlines())
    assert sorted(pending.values()) == ["Which colour?", "Which size?"]
    for line, question in pending.items():
        reply = "red" if question == "Which colour?" else "big"
        assert (
            _hpd(workdir, "answer", line.removeprefix("pending "), reply, "--db", db).returncode
            == 0
        )
    run_id = re.findall(r"hpd-agent resume (run_\w+) --db", stopped.stderr)[-1]
    done = _hpd(workdir, "resume", run_id, "--db", db)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "fast got red / slow got big\n"
