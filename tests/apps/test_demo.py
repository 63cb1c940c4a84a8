"""``hpd-agent demo`` run as a newcomer runs it, answers piped in: the headline in one screen."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLARIFIER = "Orchestrator > CodingAgent > Clarifier"
RESEARCH = "Orchestrator > ResearchAgent"


def _demo(
    tmp_path: Path, *args: str, stdin: str, columns: str = "200"
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    # TMPDIR: the demo's temporary directory is made (and must be removed) in here.
    env.update(PYTHONPATH=str(ROOT), HPD_AGENT_DEMO_PACE="0", COLUMNS=columns, TMPDIR=str(scratch))
    return subprocess.run(
        [sys.executable, "-m", "hpd_agent.cli", "demo", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )


def test_demo_asks_at_depth_two_mid_turn_and_takes_answers_out_of_order(tmp_path: Path) -> None:
    out = _demo(tmp_path, "build a todo API", stdin="FastAPI\n2\n1\n")
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    text = out.stdout
    lines = text.splitlines()

    # The prompt given on the command line is the task every agent works on.
    assert "▶ Orchestrator: build a todo API" in lines
    # The depth-2 agent asks, and the question shows its whole path.
    asked_framework = lines.index(
        f"? {CLARIFIER} asks: Which web framework should 'build a todo API' use?"
    )
    asked_store = lines.index(
        f"? {RESEARCH} asks: Where should the data of 'build a todo API' live?"
    )

    # Two questions wait together: raised ResearchAgent first, answered Clarifier first.
    waiting = re.search(r"2 questions wait at once \(asked by (.+), in that order\)", text)
    assert waiting is not None
    assert waiting.group(1) == f"{RESEARCH}, {CLARIFIER}"
    assert asked_framework < asked_store

    # The answer goes back into the Clarifier's turn; the Clarifier, then the CodingAgent,
    # go on in the turn that asked (no re-run), while the ResearchAgent's question waits.
    back = lines.index(f"  ↳ FastAPI goes back into {CLARIFIER}'s turn, which goes on")
    said = lines.index(f"{CLARIFIER}: The user chose FastAPI.")
    went_on = lines.index(
        "Orchestrator > CodingAgent: The Clarifier answered within my turn: FastAPI. "
        "Writing app.py."
    )
    assert asked_framework < back < said < went_on < asked_store
    assert text.count("→ CodingAgent(") == 1 and text.count("→ Clarifier(") == 1
    assert f"  ↳ PostgreSQL goes back into {RESEARCH}'s turn, which goes on" in lines
    assert lines.index(f"{RESEARCH}: Data goes in PostgreSQL (many writers at once).") > asked_store

    # The CodingAgent asks before writing (the prompt lists the words it takes), then
    # finishes with the framework chosen.
    assert text.index("wants to run write_file") > asked_store
    assert "type 1, y, yes or once · 2, run or all · 3, n, no or deny" in text
    assert (
        "Orchestrator: Done: Built 'build a todo API' with FastAPI in app.py. "
        "Data goes in PostgreSQL (many writers at once)."
    ) in lines

    # Nothing is shown twice: every line with content (not blank, not a blank code line).
    repeated = [line for line, n in Counter(lines).items() if n > 1 and line.strip(" │")]
    assert repeated == []
    # ...nor inside other lines: a question is not also shown as its ask_user call, and a
    # sub-agent's streamed answer is not printed again as its tool result.
    assert text.count("Which web framework should") == 1
    assert text.count("Where should the data of") == 1
    assert text.count("The user chose FastAPI.") == 1
    assert text.count("Built 'build a todo API' with FastAPI in app.py.") == 2  # coder, summary
    # The temporary directory the files went to is gone.
    assert "Files written: app.py (removed with the temporary directory)" in text
    assert list((tmp_path / "tmp").iterdir()) == []


def test_demo_writes_the_task_it_was_given_into_the_workdir(tmp_path: Path) -> None:
    work = tmp_path / "out"
    out = _demo(tmp_path, "a URL shortener", "--workdir", str(work), stdin="django\n1\ny\n")
    assert out.returncode == 0, out.stderr
    assert "Which web framework should 'a URL shortener' use?" in out.stdout
    assert "Data goes in SQLite" in out.stdout
    code = (work / "views.py").read_text()
    assert code.startswith('"""a URL shortener: built with Django')
    assert f"Files written: views.py in {work}" in out.stdout
    assert list((tmp_path / "tmp").iterdir()) == []


def test_every_line_of_a_demo_run_fits_a_narrow_terminal(tmp_path: Path) -> None:
    # Before: the questions, tool rows and notes were one line each, up to ~180 characters.
    out = _demo(tmp_path, stdin="FastAPI\n2\n1\n", columns="60")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert max(len(line) for line in lines) <= 60, [line for line in lines if len(line) > 60]
    # Wrapped, not cut: a question's words are all there, its continuation indented.
    at = lines.index("? Orchestrator > CodingAgent > Clarifier asks: Which web")
    assert lines[at + 1] == "  framework should 'Build a todo API' use?"
    assert "  1) Express" in lines and "> FastAPI" in lines
    # The file's content under write_file's row is folded, not one escaped line.
    row = next(i for i, line in enumerate(lines) if "→ write_file(" in line)
    assert lines[row : row + 2] == [
        "  Orchestrator > CodingAgent → write_file(path='app.py',",
        "    text=…)",
    ]
    assert lines[row + 2 : row + 4] == [
        "    text: (18 lines)",
        '    │ """Build a todo API: built with FastAPI."""',
    ]
    assert "    … (15 more lines)" in lines
    assert "\\n" not in out.stdout


def test_exit_at_a_question_leaves_and_nothing_is_answered(tmp_path: Path) -> None:
    out = _demo(tmp_path, "--workdir", str(tmp_path / "out"), stdin="/exit\n")
    assert out.returncode == 130, out.stdout + out.stderr
    text = out.stdout
    assert "You left (/exit), so the run is cancelled; nothing is answered or approved" in text
    assert "Run cancelled." in text
    assert "goes back into" not in text and "answered automatically" not in text
    assert "wants to run" not in text and "Traceback" not in out.stderr
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []
