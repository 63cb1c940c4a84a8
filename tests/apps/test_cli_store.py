"""The ``hpd-agent pending``, ``answer`` and ``resume`` commands, run as real processes
against a real SQLite file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import anyio.to_thread
import durable_agents
import pytest

from hpd_agent.events import ClarificationRequest
from hpd_agent.governance import os_user
from hpd_agent.store import RequestRecord, SQLiteStore

pytestmark = pytest.mark.anyio

DECLINED = (
    "Orchestrator: built with The user declined to answer. Do not ask again now; continue "
    "with your best judgement and state the assumptions you make."
)
ROOT = Path(__file__).resolve().parents[2]
TESTS = Path(__file__).resolve().parents[1]


def _env(workdir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "HPD_TEST_DIR": str(workdir),
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS)]),
        "HPD_AGENT_ALLOW_MODEL_REQUESTS": "0",
    }


async def cli(
    workdir: Path, *args: str, cwd: Path | None = None, script: bool = False
) -> subprocess.CompletedProcess[str]:
    # script=True runs the installed console script, as a user types it (no cwd on sys.path).
    command = [str(Path(sys.executable).parent / "hpd-agent")] if script else None
    done = await anyio.run_process(
        [*(command or [sys.executable, "-m", "hpd_agent.cli"]), *args],
        env=_env(workdir),
        check=False,
        cwd=cwd,
    )
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HPD_TEST_DIR", str(tmp_path))
    return tmp_path


async def _interrupted_run(db: Path) -> tuple[str, str]:
    store = SQLiteStore(db)
    result = await durable_agents.build().run("Build", store=store, on_unhandled="interrupt")
    await store.aclose()
    assert result.status == "interrupted"
    return result.run_id, result.pending[0].request_id


async def test_pending_lists_requests(workdir: Path) -> None:
    db = workdir / "runs.db"
    await SQLiteStore(db).aclose()  # an existing, empty store
    empty = await cli(workdir, "pending", "--db", str(db))
    assert empty.returncode == 0 and empty.stdout == "" and "no pending" in empty.stderr
    run_id, rid = await _interrupted_run(db)
    listed = await cli(workdir, "pending", "--db", str(db))
    assert listed.returncode == 0
    assert listed.stdout.splitlines() == [
        f"{rid}  {run_id}  Orchestrator > CodingAgent  {durable_agents.QUESTION}",
        "    Question: type your answer",
    ]
    as_json = await cli(workdir, "pending", "--db", str(db), "--json", "--run", run_id)
    (line,) = as_json.stdout.splitlines()
    item = json.loads(line)
    assert item["request_id"] == rid and item["agent_path"] == ["Orchestrator", "CodingAgent"]
    assert item["id"] == rid  # the deprecated spelling, kept for one release
    other = await cli(workdir, "pending", "--db", str(db), "--run", "run_other", "--json")
    assert other.stdout == ""


async def test_answer_exit_statuses(workdir: Path) -> None:
    db = workdir / "runs.db"
    await _options_request(db, "req_opt", "Pick", ("red", "blue"))
    unknown = await cli(workdir, "answer", "req_nope", "x", "--db", str(db))
    assert unknown.returncode == 3 and "no request" in unknown.stderr
    invalid = await cli(workdir, "answer", "req_opt", "green", "--db", str(db))
    assert invalid.returncode == 7 and "not one of the options" in invalid.stderr
    bad_json = await cli(workdir, "answer", "req_opt", "{nope", "--db", str(db), "--json")
    assert bad_json.returncode == 2 and "not valid JSON" in bad_json.stderr
    ok = await cli(workdir, "answer", "req_opt", "BLUE", "--db", str(db))
    assert ok.returncode == 0 and ok.stdout.strip() == 'answered req_opt: "blue"'
    again = await cli(workdir, "answer", "req_opt", "red", "--db", str(db))
    assert again.returncode == 4 and "already answered" in again.stderr


async def _options_request(
    db: Path,
    request_id: str,
    question: str = "Framework?",
    options: tuple[str, ...] = ("Express", "FastAPI"),
    **kw: object,
) -> None:
    """Keep a pending question of run_1 (agent A) with ``options`` in the store at ``db``."""
    store = SQLiteStore(db)
    event = ClarificationRequest(
        run_id="run_1",
        agent_path=("A",),
        depth=0,
        request_id=request_id,
        question=question,
        options=options,
        **kw,  # type: ignore[arg-type]
    )
    await store.add_request(RequestRecord.from_event(event))
    await store.aclose()


async def test_options_are_numbered_from_1_where_a_person_types(workdir: Path) -> None:
    db = workdir / "runs.db"
    await _options_request(db, "req_a")
    await _options_request(db, "req_b")
    await _options_request(db, "req_c", question_kind="choice", data={"multiple": True})
    listed = await cli(workdir, "pending", "--db", str(db))
    assert listed.returncode == 0
    assert listed.stdout.splitlines()[:2] == [
        "req_a  run_1  A  Framework?  1. Express  2. FastAPI",
        "    Choose one: type a number from 1 to 2 (as listed: 1 is the first) or the value",
    ]
    assert listed.stdout.splitlines()[5] == (
        "    Choose any: type one or more, separated by commas: a number from 1 to 2 (as "
        "listed: 1 is the first) or the value"
    )
    first = await cli(workdir, "answer", "req_a", "1", "--db", str(db))
    assert first.returncode == 0 and first.stdout.strip() == 'answered req_a: "Express"'
    out_of_range = await cli(workdir, "answer", "req_b", "3", "--db", str(db))
    assert out_of_range.returncode == 2
    assert one_line(out_of_range) == (
        "error: request req_b: There is no option 3: type a number from 1 to 2 "
        "(as listed: 1 is the first) or an option's text."
    )
    assert "Traceback" not in out_of_range.stderr
    zero = await cli(workdir, "answer", "req_b", "0", "--db", str(db))
    assert zero.returncode == 2 and "no option 0" in zero.stderr
    by_text = await cli(workdir, "answer", "req_b", "fastapi", "--db", str(db))
    assert by_text.returncode == 0 and by_text.stdout.strip() == 'answered req_b: "FastAPI"'
    several = await cli(workdir, "answer", "req_c", "2, 1", "--db", str(db))
    assert several.returncode == 0, several.stderr
    assert several.stdout.strip() == 'answered req_c: ["FastAPI", "Express"]'


async def test_a_json_answer_stays_programmatic_0_based(workdir: Path) -> None:
    db = workdir / "runs.db"
    await _options_request(db, "req_a")
    done = await cli(workdir, "answer", "req_a", "1", "--json", "--db", str(db))
    assert done.returncode == 0 and done.stdout.strip() == 'answered req_a: "FastAPI"'


async def test_resume_with_answer_completes_without_rerunning(workdir: Path) -> None:
    db = workdir / "runs.db"
    run_id, rid = await _interrupted_run(db)
    agent = "durable_agents:build"
    stopped = await cli(workdir, "resume", run_id, "--db", str(db), "--agent", agent, "--interrupt")
    assert stopped.returncode == 75  # interrupted: not an error status
    assert stopped.stdout.strip() == f"pending {rid}: {durable_agents.QUESTION}"
    done = await cli(
        workdir, "resume", run_id, "--db", str(db), "--agent", agent, "--answer", f"{rid}=Hanami"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Orchestrator: built with Hanami"
    assert durable_agents.read_lines("side_effects.txt") == ["scaffolded"]
    assert durable_agents.read_lines("calls.txt") == durable_agents.EVERY_TURN


async def test_resume_answers_are_recorded_as_given_on_the_cli(workdir: Path) -> None:
    db = workdir / "runs.db"
    agent = "durable_agents:build"
    for who, expected in ((("--as", "carol"), "carol"), ((), os_user())):
        run_id, rid = await _interrupted_run(db)
        done = await cli(
            workdir, "resume", run_id, "--db", str(db), "--agent", agent, "--answer",
            f"{rid}=Hanami", *who,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        store = SQLiteStore(db)
        record = await store.get_request(rid)
        await store.aclose()
        assert record is not None and (record.answered_by, record.channel) == (expected, "cli")


def _resume_and_answer_from_another_terminal(
    db: Path, workdir: Path, run_id: str, rid: str, answer: tuple[str, ...] = ("Falcon",)
) -> subprocess.Popen[str]:
    resume = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hpd_agent.cli",
            "resume",
            run_id,
            "--db",
            str(db),
            "--agent",
            "durable_agents:build",
        ],
        env=_env(workdir),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert resume.stderr is not None
        notice = resume.stderr.readline()  # blocks until the question is announced
        assert notice.startswith(f"waiting for {rid} (Orchestrator > CodingAgent)")
        answered = subprocess.run(
            [sys.executable, "-m", "hpd_agent.cli", "answer", rid, *answer, "--db", str(db)],
            env=_env(workdir),
            capture_output=True,
            timeout=60,
        )
        assert answered.returncode == 0
        resume.wait(timeout=60)
    finally:
        resume.kill()
    return resume


async def test_resume_waits_for_an_answer_from_another_terminal(workdir: Path) -> None:
    db = workdir / "runs.db"
    run_id, rid = await _interrupted_run(db)
    resume = await anyio.to_thread.run_sync(
        _resume_and_answer_from_another_terminal, db, workdir, run_id, rid
    )
    assert resume.stdout is not None
    out = resume.stdout.read()
    assert resume.returncode == 0
    assert out.strip() == "Orchestrator: built with Falcon"


async def test_answer_decline(workdir: Path) -> None:
    db = workdir / "runs.db"
    run_id, rid = await _interrupted_run(db)
    both = await cli(workdir, "answer", rid, "Flask", "--decline", "--db", str(db))
    assert both.returncode == 2 and "not both" in both.stderr
    neither = await cli(workdir, "answer", rid, "--db", str(db))
    assert neither.returncode == 2 and "--decline" in neither.stderr
    with_json = await cli(workdir, "answer", rid, "--decline", "--json", "--db", str(db))
    assert with_json.returncode == 2
    unknown = await cli(workdir, "answer", "req_nope", "--decline", "--db", str(db))
    assert unknown.returncode == 3 and "no request" in unknown.stderr
    for refused in (both, neither, with_json, unknown):
        assert "Traceback" not in refused.stderr
    declined = await cli(workdir, "answer", rid, "--decline", "--db", str(db))
    assert declined.returncode == 0, declined.stderr
    assert declined.stdout.strip() == f"declined {rid}"
    # Ended for good: a second decline or an answer says so, with the "answered" status.
    for late in (("--decline",), ("Flask",)):
        again = await cli(workdir, "answer", rid, *late, "--db", str(db))
        assert again.returncode == 4 and f"request {rid} was declined" in again.stderr
    listed = await cli(workdir, "pending", "--db", str(db))
    assert listed.stdout == "" and "no pending requests" in listed.stderr
    store = SQLiteStore(db)
    record = await store.get_request(rid)
    await store.aclose()
    assert record is not None and (record.status, record.context) == (
        "declined",
        {"channel": "cli", "answered_by": os_user()},  # `answer` answers as the OS user
    )
    done = await cli(workdir, "resume", run_id, "--db", str(db), "--agent", "durable_agents:build")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == DECLINED


async def test_decline_from_another_terminal_wakes_the_resumed_run(workdir: Path) -> None:
    db = workdir / "runs.db"
    run_id, rid = await _interrupted_run(db)
    resume = await anyio.to_thread.run_sync(
        _resume_and_answer_from_another_terminal, db, workdir, run_id, rid, ("--decline",)
    )
    assert resume.stdout is not None
    assert resume.returncode == 0
    assert resume.stdout.read().strip() == DECLINED


async def test_resume_reports_bad_input(workdir: Path) -> None:
    db = workdir / "runs.db"
    run_id, rid = await _interrupted_run(db)
    no_run = await cli(
        workdir, "resume", "run_missing", "--db", str(db), "--agent", "durable_agents:build"
    )
    assert no_run.returncode == 11 and "no run 'run_missing'" in no_run.stderr
    bad_agent = await cli(
        workdir, "resume", run_id, "--db", str(db), "--agent", "durable_agents:nothing"
    )
    assert bad_agent.returncode == 10 and "cannot load --agent" in bad_agent.stderr
    resume = ["resume", run_id, "--db", str(db), "--agent", "durable_agents:build"]
    bad_form = await cli(workdir, *resume, "--answer", "oops")
    assert bad_form.returncode == 2 and "REQUEST_ID=TEXT" in bad_form.stderr
    # A refused answer resumes nothing and leaves the request pending.
    wrong = await cli(workdir, *resume, "--answer", "req_x=1")
    assert wrong.returncode == 12 and "no request" in wrong.stderr
    store = SQLiteStore(db)
    record = await store.get_request(rid)
    assert record is not None and record.status == "pending"
    await store.aclose()


async def test_answer_a_permission_request(workdir: Path) -> None:
    from hpd_agent.events import PermissionRequest

    db = workdir / "runs.db"
    store = SQLiteStore(db)
    event = PermissionRequest(
        run_id="run_1",
        agent_path=("A",),
        depth=0,
        request_id="req_perm",
        tool_name="deploy",
        arguments={"target": "prod"},
        tool_call_id="c1",
    )
    await store.add_request(RequestRecord.from_event(event))
    listed = await cli(workdir, "pending", "--db", str(db))
    # One readable line: the tool, then each argument once as name: value (no raw JSON).
    assert listed.stdout.splitlines() == [
        "req_perm  run_1  A  Allow deploy? (target: prod)",
        "    Permission: type y (allow this call), run (allow the tool for the run), always "
        "(allow it from now on: a remembered grant) or n",
    ]
    refused = await cli(workdir, "answer", "req_perm", "maybe", "--db", str(db))
    assert refused.returncode == 7 and "neither an approval nor a denial" in refused.stderr
    # "always" is a remembered grant (its run keeps it in the store when it reads the answer).
    ok = await cli(workdir, "answer", "req_perm", "always", "--db", str(db))
    assert ok.returncode == 0
    record = await store.get_request("req_perm")
    assert record is not None and record.answer == {"scope": "always", "kind": "approve"}
    await store.aclose()


# -- bad input, as a new user would try it: one line, its own exit status, nothing lost -------
def one_line(done: subprocess.CompletedProcess[str]) -> str:
    """The single stderr line of a failed command (never a traceback)."""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    return lines[0]


async def test_db_that_does_not_exist_is_refused_not_created(workdir: Path) -> None:
    typo = workdir / "rnus.db"
    for args in (
        ["pending", "--db", str(typo)],
        ["answer", "req_1", "yes", "--db", str(typo)],
        ["resume", "run_1", "--db", str(typo), "--agent", "durable_agents:build"],
    ):
        done = await cli(workdir, *args)
        assert done.returncode == 8
        assert "does not exist" in one_line(done) and str(typo) in done.stderr
    assert not typo.exists()
    nowhere = workdir / "no" / "such" / "dir" / "runs.db"
    done = await cli(workdir, "pending", "--db", str(nowhere))
    assert done.returncode == 8 and f"directory '{nowhere.parent}' does not exist" in one_line(done)
    not_db = workdir / "notes.txt"
    not_db.write_text("these are my notes, not a database\n" * 100)
    done = await cli(workdir, "pending", "--db", str(not_db))
    assert done.returncode == 8 and "not a database" in one_line(done)
    assert not_db.read_text().startswith("these are my notes")  # nothing was written to it
    done = await cli(workdir, "pending", "--db", str(workdir))
    assert done.returncode == 8 and "is a directory" in one_line(done)


async def test_unreachable_postgres_is_one_line(workdir: Path) -> None:
    pytest.importorskip("psycopg")
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    done = await cli(workdir, "pending", "--db", f"postgresql://me:secret@127.0.0.1:{port}/runs")
    line = one_line(done)
    assert done.returncode == 8 and f"127.0.0.1:{port}/runs" in line
    assert "secret" not in line


def _corrupt(db: Path, sql: str, *args: object) -> None:
    import sqlite3

    with sqlite3.connect(db) as conn:
        conn.execute(sql, args)


async def _two_requests(db: Path) -> None:
    store = SQLiteStore(db)
    for rid, created in (("req_bad", 1.0), ("req_good", 2.0)):
        event = ClarificationRequest(
            run_id="run_1", agent_path=("A",), depth=0, request_id=rid, question=f"Q {rid}?"
        )
        await store.add_request(RequestRecord.from_event(event, now=created))
    await store.aclose()


async def test_a_corrupt_request_row_hides_no_other(workdir: Path) -> None:
    db = workdir / "runs.db"
    await _two_requests(db)
    _corrupt(db, "UPDATE hpd_requests SET payload = '{not json' WHERE id = 'req_bad'")
    listed = await cli(workdir, "pending", "--db", str(db))
    assert listed.returncode == 9
    assert listed.stdout.splitlines() == [
        "req_good  run_1  A  Q req_good?",
        "    Question: type your answer",
    ]
    line = one_line(listed)
    assert "request req_bad (run run_1): column payload is not JSON" in line
    as_json = await cli(workdir, "pending", "--db", str(db), "--json")
    assert as_json.returncode == 9 and json.loads(as_json.stdout)["request_id"] == "req_good"
    answered = await cli(workdir, "answer", "req_bad", "x", "--db", str(db))
    assert answered.returncode == 9 and "request req_bad" in one_line(answered)
    ok = await cli(workdir, "answer", "req_good", "fine", "--db", str(db))
    assert ok.returncode == 0, ok.stderr


async def test_a_payload_of_the_wrong_kind_is_named(workdir: Path) -> None:
    from hpd_agent.events import TextDelta, dump_event

    db = workdir / "runs.db"
    await _two_requests(db)
    delta = dump_event(TextDelta(run_id="run_1", agent_path=("A",), depth=0, text="hi"))
    _corrupt(db, "UPDATE hpd_requests SET payload = ? WHERE id = 'req_bad'", delta)
    answered = await cli(workdir, "answer", "req_bad", "x", "--db", str(db))
    assert answered.returncode == 9
    assert "request req_bad (run run_1)" in one_line(answered) and "'text_delta'" in answered.stderr
    _corrupt(db, "UPDATE hpd_requests SET payload = '{\"kind\": 3}' WHERE id = 'req_bad'")
    answered = await cli(workdir, "answer", "req_bad", "x", "--db", str(db))
    assert answered.returncode == 9 and "payload is not an event" in one_line(answered)
    store = SQLiteStore(db)
    record = await store.get_request("req_bad")
    assert record is not None and record.status == "pending"  # nothing changed
    await store.aclose()


@pytest.mark.parametrize(
    ("value", "why"),
    [("garbage", "column value is not JSON"), ('{"result": 1}', "a tool entry needs result")],
)
async def test_a_garbage_journal_entry_is_named_by_its_key(
    workdir: Path, value: str, why: str
) -> None:
    db = workdir / "runs.db"
    run_id, rid = await _interrupted_run(db)
    store = SQLiteStore(db)
    # The scaffolding tool's recorded result.
    (key,) = [k for k, e in (await store.journal(run_id)).items() if k.endswith(":step")]
    await store.aclose()
    _corrupt(db, "UPDATE hpd_journal SET value = ? WHERE key = ?", value, key)
    done = await cli(
        workdir, "resume", run_id, "--db", str(db), "--agent", "durable_agents:build",
        "--answer", f"{rid}=Hanami",
    )  # fmt: skip
    line = one_line(done)
    assert done.returncode == 9 and f"journal entry {key!r} of run {run_id}" in line and why in line
    assert durable_agents.read_lines("side_effects.txt") == ["scaffolded"]  # not run again


async def test_deeply_nested_json_answer_is_refused(workdir: Path) -> None:
    db = workdir / "runs.db"
    await _two_requests(db)
    nested = "[" * 50_000 + "]" * 50_000
    done = await cli(workdir, "answer", "req_good", nested, "--db", str(db), "--json")
    assert done.returncode == 2 and "nested too deeply" in one_line(done)


async def test_resume_refuses_a_run_whose_agent_is_unknown_or_another(workdir: Path) -> None:
    db = workdir / "runs.db"
    run_id, rid = await _interrupted_run(db)  # built by a factory: no module:attr recorded
    calls = durable_agents.read_lines("calls.txt")
    unknown = await cli(workdir, "resume", run_id, "--db", str(db), "--answer", f"{rid}=Hanami")
    assert unknown.returncode == 10
    assert "does not record where its agent 'Orchestrator'" in one_line(unknown)
    wrong_name = await cli(
        workdir, "resume", run_id, "--db", str(db), "--agent", "durable_agents:other_agent"
    )
    assert wrong_name.returncode == 10 and "started by agent 'Orchestrator'" in one_line(wrong_name)
    store = SQLiteStore(db)
    run = await store.get_run(run_id)
    assert run is not None and run.status == "interrupted" and run.agent_ref is None
    request = await store.get_request(rid)
    assert request is not None and request.status == "pending"  # the answer was not spent
    await store.aclose()
    assert durable_agents.read_lines("calls.txt") == calls  # no model was called

    agent = "durable_agents:build"
    stopped = await cli(workdir, "resume", run_id, "--db", str(db), "--agent", agent, "--interrupt")
    assert stopped.returncode == 75  # and the run now records its agent
    other = await cli(workdir, "resume", run_id, "--db", str(db), "--agent", "durable_agents:AGENT")
    assert other.returncode == 10
    assert f"run {run_id} belongs to agent durable_agents:build" in one_line(other)
    done = await cli(workdir, "resume", run_id, "--db", str(db), "--answer", f"{rid}=Hanami")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Orchestrator: built with Hanami"


async def test_a_run_of_a_module_global_agent_records_it(workdir: Path) -> None:
    db = workdir / "runs.db"
    store = SQLiteStore(db)
    result = await durable_agents.AGENT.run("Build", store=store, on_unhandled="interrupt")
    run = await store.get_run(result.run_id)
    await store.aclose()
    assert run is not None and run.agent_ref == "durable_agents:AGENT"
    rid = result.pending[0].request_id
    done = await cli(workdir, "resume", result.run_id, "--db", str(db), "--answer", f"{rid}=Loco")
    assert done.returncode == 0 and done.stdout.strip() == "Orchestrator: built with Loco"


async def test_agent_modules_are_found_in_the_current_directory(workdir: Path) -> None:
    db = workdir / "runs.db"
    run_id, _ = await _interrupted_run(db)
    project = workdir / "project"
    project.mkdir()
    (project / "myagents.py").write_text("from durable_agents import build as make\n")
    done = await cli(
        workdir, "resume", run_id, "--db", str(db), "--agent", "myagents:make", "--interrupt",
        cwd=project, script=True,
    )  # fmt: skip
    assert done.returncode == 75, done.stderr


async def test_pending_shows_controls_instead_of_obeying_them(workdir: Path) -> None:
    db = workdir / "runs.db"
    await _options_request(
        db,
        "req_evil",
        "Deploy?\x1b[2J\x1b]0;owned\x07\nreq_fake  run_1  A  text: Fake row\r\u202eok",
        ("yes\x1b[8m", "no"),
    )
    listed = await cli(workdir, "pending", "--db", str(db))
    assert listed.returncode == 0
    # The newline in the question fakes no row: the request's line, then what to type.
    line, prompt = listed.stdout.splitlines()
    assert "\x1b" not in line and "\x07" not in line and "\r" not in line
    assert line == (
        "req_evil  run_1  A  Deploy?\\x1b[2J\\x1b]0;owned\\x07\\nreq_fake  run_1  A  "
        "text: Fake row\\r\\u202eok  1. yes\\x1b[8m  2. no"
    )
    assert prompt.startswith("    Choose one: type a number from 1 to 2")


# -- a question kind of the app's own, answered where nobody imported it -----------------------
_RESPOND = """
import json, sys
import anyio
from hpd_agent.questions import kind_named
from hpd_agent.store import SQLiteStore, respond

async def main() -> None:
    store = SQLiteStore(sys.argv[1], create=False)
    try:
        for answer in json.loads(sys.argv[3]):
            try:
                record = await respond(store, sys.argv[2], answer)
                print("answered", json.dumps(record.answer))
            except Exception as e:
                print(type(e).__name__, e)
    finally:
        await store.aclose()
    print("kind known here:", kind_named("rating") is not None, "rating_kind" in sys.modules)

anyio.run(main)
"""


async def _rating_asked(db: Path) -> tuple[str, str]:
    """Interrupt a run at its ``rating`` question (tests/rating_kind.py): the run's id and
    the request's."""
    from rating_kind import rate_plan

    from hpd_agent import Agent
    from hpd_agent.testing import ScriptedModel, text, tool_call

    store = SQLiteStore(db)
    model = ScriptedModel([tool_call("rate_plan"), text("done")])
    agent = Agent("Planner", model=model, tools=[rate_plan])
    result = await agent.run("plan", store=store, on_unhandled="interrupt")
    await store.aclose()
    assert result.status == "interrupted"
    return result.run_id, result.pending[0].request_id


async def test_a_rating_is_checked_by_store_respond_in_a_process_that_never_imported_it(
    workdir: Path,
) -> None:
    from hpd_agent.questions import validate_answer

    db = workdir / "runs.db"
    _, rid = await _rating_asked(db)
    done = await anyio.run_process(
        [sys.executable, "-c", _RESPOND, str(db), rid, json.dumps([9, "4", 4, 5])],
        env=_env(workdir),
        check=False,
    )
    lines = done.stdout.decode().splitlines()
    assert done.returncode == 0, done.stderr.decode()
    store = SQLiteStore(db)
    record = await store.get_request(rid)
    await store.aclose()
    assert record is not None and (record.status, record.answer) == ("answered", 4)
    # Refused there exactly as here, where the kind is registered.
    here: list[str] = []
    for answer in (9, "4"):
        with pytest.raises(Exception) as refused:
            validate_answer(record.event, answer)
        here.append(f"{type(refused.value).__name__} {refused.value}")
    assert lines == [
        *here,
        "answered 4",
        f"RequestAlreadyAnsweredError request {rid} was already answered",
        "kind known here: False False",
    ]
    assert "9 is greater than the maximum of 5" in here[0]


async def test_pending_and_answer_show_and_read_a_rating_by_its_label_and_schema(
    workdir: Path,
) -> None:
    db = workdir / "runs.db"
    run_id, rid = await _rating_asked(db)
    listed = await cli(workdir, "pending", "--db", str(db))
    assert listed.stdout.splitlines() == [
        f"{rid}  {run_id}  Planner  How good was the plan?",
        "    Rate 1–5: type a whole number from 1 to 5",
    ]
    as_json = json.loads((await cli(workdir, "pending", "--db", str(db), "--json")).stdout)
    assert (as_json["kind"], as_json["label"]) == ("rating", "Rate 1–5")
    assert as_json["answer_schema"] == {"type": "integer", "minimum": 1, "maximum": 5}
    # Typed text is read by the schema here (this process never imported the kind's reader).
    unread = await cli(workdir, "answer", rid, "4/5", "--db", str(db))
    assert unread.returncode == 2
    assert one_line(unread) == f"error: request {rid}: Type a whole number from 1 to 5."
    refused = await cli(workdir, "answer", rid, "9", "--db", str(db))
    assert refused.returncode == 7 and "9 is greater than the maximum of 5" in refused.stderr
    done = await cli(workdir, "answer", rid, "4", "--db", str(db))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"answered {rid}: 4"
