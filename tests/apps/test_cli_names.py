"""The ``hpd-agent`` commands agree on names and hints: one store option (``--store``, with
``--db`` its alias), ``--api-base`` wherever ``--model`` suggests it, MODULE:ATTR errors that
name the command and the file and suggest what was meant, help for every command and
argument, and one vocabulary for what a request wants on every surface (``answer_prompt``)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from hpd_agent.events import ClarificationRequest, PermissionRequest, RequestEvent
from hpd_agent.store import RequestRecord, SQLiteStore

ROOT = Path(__file__).resolve().parents[2]
INBOX_JS = ROOT / "hpd_agent" / "web" / "static" / "inbox.js"


def _hpd(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(PYTHONPATH=str(ROOT), COLUMNS="200", HPD_AGENT_DEMO_PACE="0")
    env.update(HPD_AGENT_ALLOW_MODEL_REQUESTS="1")  # only a loopback address is ever given
    return subprocess.run(
        [sys.executable, "-m", "hpd_agent.cli", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
    )


def _asking(request_id: str, **fields: object) -> ClarificationRequest:
    return ClarificationRequest(
        run_id="run_1",
        agent_path=("Planner", "Clarifier"),
        depth=1,
        request_id=request_id,
        question="Which framework?",
        **fields,  # type: ignore[arg-type]
    )


def _store_with(path: Path, *events: RequestEvent) -> None:
    async def keep() -> None:
        store = SQLiteStore(path)
        for event in events:
            await store.add_request(RequestRecord.from_event(event))
        await store.aclose()

    anyio.run(keep)


# -- one store option ------------------------------------------------------------------------
@pytest.mark.parametrize("spelling", ["--store", "--db"])
def test_the_store_commands_take_store_and_db_alike(tmp_path: Path, spelling: str) -> None:
    db = tmp_path / "runs.db"
    _store_with(db, _asking("req_1", options=("Express", "FastAPI")))
    listed = _hpd("pending", spelling, str(db))
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith("req_1  run_1  Planner > Clarifier  Which framework?")
    # The hint names the one spelling every command takes.
    assert f"hpd-agent answer REQUEST_ID TEXT --store {db}" in listed.stderr
    answered = _hpd("answer", "req_1", "2", spelling, str(db))
    assert answered.stdout.strip() == 'answered req_1: "FastAPI"', answered.stderr
    resumed = _hpd("resume", "run_nope", spelling, str(db))
    assert resumed.returncode == 11 and "no run 'run_nope'" in resumed.stderr


@pytest.mark.parametrize("command", ["pending", "answer", "resume", "run", "serve", "mcp", "acp"])
def test_every_command_that_opens_a_store_names_it_store(command: str) -> None:
    shown = _hpd(command, "--help").stdout
    assert "--store STORE, --db STORE" in shown


# -- --api-base wherever --model suggests it -------------------------------------------------
def test_demo_takes_the_api_base_its_missing_key_hint_suggests() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        address = f"http://127.0.0.1:{s.getsockname()[1]}/v1"  # nothing listens once closed
    out = _hpd("demo", "--model", "openai/served", "--api-base", address, "--yes")
    # No key asked for (a server of one's own), and the agents went to that server.
    assert "no API key" not in out.stdout + out.stderr
    assert f"nothing is listening at {address}" in out.stdout, out.stdout + out.stderr
    assert out.returncode == 1
    alone = _hpd("demo", "--api-base", address)
    assert alone.returncode == 2 and "--api-base goes with --model" in alone.stderr


# -- MODULE:ATTR -----------------------------------------------------------------------------
@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "bots.py").write_text(
        "from hpd_agent import Agent\n"
        "from hpd_agent.testing import ScriptedModel, text\n\n"
        'planner = Agent("Planner", model=ScriptedModel([text("ok")]))\n'
    )
    return tmp_path


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["mcp", "bots:planer"],
            "error: mcp: cannot load MODULE:ATTR 'bots:planer': module bots (bots.py) has no "
            "attribute 'planer'; did you mean 'planner'?",
        ),
        (
            ["serve", "bots.py:Planner"],
            "error: serve: cannot load MODULE:ATTR 'bots.py:Planner': bots.py has no attribute "
            "'Planner'; did you mean 'planner'?",
        ),
        (
            ["serve", "--a2a", "bots:agent"],
            "error: serve --a2a: cannot load MODULE:ATTR 'bots:agent': module bots (bots.py) "
            "has no attribute 'agent'; it has planner",
        ),
        (
            ["mcp", "bots"],
            "error: mcp: MODULE:ATTR 'bots' is not of the form: pass mcp MODULE:ATTR, e.g. "
            "package.module:NAME or path/to/script.py:NAME, where NAME is the global holding "
            "the Agent or a function returning it (importable from the current directory)",
        ),
    ],
)
def test_a_wrong_module_attr_names_the_command_the_file_and_what_was_meant(
    project: Path, args: list[str], said: str
) -> None:
    out = _hpd(*args, cwd=project)
    assert out.returncode == 10, out.stderr
    assert out.stderr.splitlines() == [said]


def test_resume_agent_names_the_attribute_it_lacks(project: Path) -> None:
    db = project / "runs.db"
    _store_with(db)

    async def started() -> None:
        from hpd_agent.store import RunRecord

        store = SQLiteStore(db)
        run = RunRecord(run_id="run_1", agent_name="Planner", prompt="Plan", status="interrupted")
        await store.put_run(run)
        await store.aclose()

    anyio.run(started)
    out = _hpd("resume", "run_1", "--store", str(db), "--agent", "bots.py:planer", cwd=project)
    assert out.returncode == 10
    assert out.stderr.splitlines() == [
        "error: cannot load --agent 'bots.py:planer': bots.py has no attribute 'planer'; "
        "did you mean 'planner'?"
    ]


# -- help ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("command", "says"),
    [
        ("pending", ["List the questions and permission requests waiting", "RUN_ID"]),
        ("answer", ["Answer (or decline) one pending request", "REQUEST_ID  the request"]),
        ("resume", ["Continue a run journaled in a store", "RUN_ID      the run"]),
        (
            "serve",
            [
                "the web page at /, the AG-UI endpoint POST /agent and the question inbox",
                "a line per run started or ended and per question asked or answered (--quiet",
                "package.module:NAME (importable from the current directory) or "
                "path/to/script.py:NAME",
            ],
        ),
        ("mcp", ["package.module:NAME (importable from the current directory)"]),
    ],
)
def test_the_commands_describe_themselves_and_every_argument(command: str, says: list[str]) -> None:
    shown = " ".join(_hpd(command, "--help").stdout.split())  # argparse wraps at COLUMNS
    for said in says:
        assert " ".join(said.split()) in shown, shown
    assert "deprecated" not in shown


def test_resume_agent_help_gives_both_forms() -> None:
    shown = " ".join(_hpd("resume", "--help").stdout.split())
    assert "--agent MODULE:ATTR" in shown
    assert "package.module:NAME or path/to/script.py:NAME" in shown
    assert "--max-age SECONDS expire this run's pending requests older than SECONDS" in shown


# -- one vocabulary ----------------------------------------------------------------------------
_KINDS: list[RequestEvent] = [
    _asking("r_text"),
    _asking("r_text_options", options=("Express", "FastAPI")),
    _asking("r_choice", question_kind="choice", options=("Express", "FastAPI")),
    _asking(
        "r_multiple",
        question_kind="choice",
        options=("Express", "FastAPI"),
        data={"multiple": True},
    ),
    _asking("r_confirm", question_kind="confirm"),
    _asking("r_input", question_kind="input", data={"argument": "path", "tool": "write"}),
    _asking("r_action", question_kind="action", data={"url": "https://example.com/login"}),
    _asking("r_custom", question_kind="custom", data={"name": "form", "schema": None}),
    _asking(
        "r_rating",
        question_kind="rating",
        label="Rate 1–5",
        answer_schema={"type": "integer", "minimum": 1, "maximum": 5},
    ),
    PermissionRequest(
        run_id="run_1",
        agent_path=("Planner",),
        depth=0,
        request_id="r_permission",
        tool_name="deploy",
        arguments={"target": "prod"},
        tool_call_id="c1",
    ),
]


_LABELS = [
    "Question",
    "Choose one",
    "Choose one",
    "Choose any",
    "Yes or no",
    "Value needed",
    "Action needed",
    "Form",
    "Rate 1–5",
    "Permission",
]


def test_every_surface_labels_a_request_with_answer_prompt(tmp_path: Path) -> None:
    from rich.console import Console

    from hpd_agent.handlers._printing import ConsolePrinter  # pyright: ignore[reportPrivateUsage]
    from hpd_agent.questions import answer_prompt
    from hpd_agent.web._requests import request_value  # pyright: ignore[reportPrivateUsage]

    prompts = [answer_prompt(event) for event in _KINDS]
    assert [p.label for p in prompts] == _LABELS
    # The web page: the server sends the label, the card shows it as sent.
    requests = [request_value(RequestRecord.from_event(event)) for event in _KINDS]
    assert [r["label"] for r in requests] == _LABELS
    script = (
        f"import {{ kindLabel }} from {json.dumps(INBOX_JS.as_uri())};\n"
        f"for (const r of {json.dumps(requests)}) console.log(kindLabel(r));\n"
    )
    page = subprocess.run(
        ["node", "--input-type=module", "-e", script],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.splitlines()
    assert page == _LABELS
    # The console: the same label, then what to type.
    for event, prompt in zip(_KINDS, prompts, strict=True):
        console = Console(width=400, record=True, force_terminal=False)
        printer = ConsolePrinter(console, show_tool_results=False, max_chars=400)
        if isinstance(event, PermissionRequest):
            printer.show_permission(event)  # its hint also takes the numbers it lists
        else:
            printer.show_question(event)
        shown = console.export_text()
        assert f"\n  {prompt.label}: " in shown
        assert isinstance(event, PermissionRequest) or f"\n  {prompt}\n" in shown
    # hpd-agent pending, lines and --json alike.
    db = tmp_path / "runs.db"
    _store_with(db, *_KINDS)
    listed = _hpd("pending", "--store", str(db)).stdout.splitlines()
    assert [line.strip() for line in listed[1::2]] == [str(p) for p in prompts]
    as_json = _hpd("pending", "--store", str(db), "--json").stdout.splitlines()
    assert [json.loads(line)["label"] for line in as_json] == _LABELS
