"""``hpd-agent serve --hook MODULE:ATTR``: the hook is installed for every run the server
starts (a receiver on 127.0.0.1 gets the webhook of a served run's question); one that does
not load is one error line before anything starts."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from _webhooks import receiving
from conftest import REPO, run_input, serve_command, start_server


def test_served_runs_notify_through_the_hook_serve_was_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with receiving() as (receiver, url):
        monkeypatch.setenv("HPD_TEST_WEBHOOK_URL", url)
        server = start_server(tmp_path, "--hook", "tests.web.web_hook:webhook")
        try:
            with (
                server.client() as c,
                c.stream("POST", "/agent", json=run_input("t", "r1", "permission")) as response,
            ):
                assert response.status_code == 200
                response.read()  # the run ends interrupted at its question
            assert receiver.wait_arrived(1)
        finally:
            server.stop()
    (opened,) = receiver.received
    assert opened.signed_by("s3cret")
    payload = opened.payload
    assert (payload["event"], payload["question_kind"]) == ("opened", "permission")
    assert payload["agent_path"] == ["Orchestrator"]


@pytest.mark.parametrize(
    ("hook", "said"),
    [
        ("tests.web.nosuch:webhook", "cannot load --hook 'tests.web.nosuch:webhook': "),
        ("tests.web.web_hook:not_a_hook", "--hook 'tests.web.web_hook:not_a_hook' gave str"),
        ("no-colon", "--hook 'no-colon' is not of the form MODULE:ATTR"),
    ],
)
def test_a_hook_that_does_not_load_is_one_line_before_anything_starts(
    tmp_path: Path, hook: str, said: str
) -> None:
    command = serve_command("--port", "0", "--store", str(tmp_path / "s.db"), "--hook", hook)
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert said in done.stderr and done.stderr.count("\n") == 1
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "s.db").exists()
