"""``hpd-agent grants list|revoke``, run as real processes against a real SQLite file: the
table and its JSON, revoking (once), and each failure as one line with its exit status."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from test_cli_store import cli

from hpd_agent.permissions import Grant
from hpd_agent.store import SQLiteStore

pytestmark = pytest.mark.anyio


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HPD_TEST_DIR", str(tmp_path))
    return tmp_path


async def _store_with_grants(db: Path) -> tuple[Grant, Grant]:
    store = SQLiteStore(db)
    book = store.capabilities().grants
    assert book is not None
    now = time.time()
    staging = Grant(
        grant_id="a1b2c3d4e5f6",
        tool_name="deploy",
        agent_path=("Ops", "Deployer"),
        match={"env": "staging-*"},
        granted_by="alice",
        channel="web",
        request_id="req_1",
        created_at=now - 10,
        until=now + 3600,
    )
    # A name a terminal would obey shows as text; an expired grant is listed with --all only.
    lapsed = Grant(
        grant_id="0f0f0f0f0f0f",
        tool_name="rm\x1b[2J",
        agent_path=("Ops",),
        created_at=now - 20,
        until=now - 5,
    )
    await book.add_grant(staging)
    await book.add_grant(lapsed)
    await store.aclose()
    return staging, lapsed


async def test_list_shows_each_live_grant_on_a_line_and_as_json(workdir: Path) -> None:
    db = workdir / "runs.db"
    staging, _ = await _store_with_grants(db)
    listed = await cli(workdir, "grants", "list", "--store", str(db))
    assert listed.returncode == 0, listed.stderr
    header, row = listed.stdout.splitlines()
    assert header.split() == ["ID", "TOOL", "MATCH", "PATH", "BY", "VIA", "CREATED", "UNTIL"]
    assert row.split()[:3] == ["a1b2c3d4e5f6", "deploy", "env=staging-*"]
    assert "Ops > Deployer" in row and "alice  web" in row
    everything = await cli(workdir, "grants", "list", "--store", str(db), "--all")
    assert "\x1b" not in everything.stdout and "rm\\x1b[2J" in everything.stdout
    assert [line.split()[-1] for line in everything.stdout.splitlines()] == [
        "STATUS",
        "expired",
        "live",
    ]
    as_json = await cli(workdir, "grants", "list", "--db", str(db), "--json", "--all")
    items = json.loads(as_json.stdout)
    assert [(i["grant_id"], i["status"]) for i in items] == [
        ("0f0f0f0f0f0f", "expired"),
        ("a1b2c3d4e5f6", "live"),
    ]
    assert items[1] == {
        "grant_id": "a1b2c3d4e5f6",
        "tool_name": "deploy",
        "match": {"env": "staging-*"},
        "agent_path": ["Ops", "Deployer"],
        "granted_by": "alice",
        "channel": "web",
        "request_id": "req_1",
        "created_at": staging.created_at,
        "until": staging.until,
        "revoked_at": None,
        "revoked_by": None,
        "status": "live",
    }


async def test_revoke_ends_a_grant_once_and_says_who(workdir: Path) -> None:
    db = workdir / "runs.db"
    await _store_with_grants(db)
    done = await cli(workdir, "grants", "revoke", "a1b2c3d4e5f6", "--store", str(db), "--as", "bob")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("revoked grant a1b2c3d4e5f6 (deploy at Ops > Deployer)")
    again = await cli(workdir, "grants", "revoke", "a1b2c3d4e5f6", "--store", str(db))
    assert again.returncode == 0 and "was revoked already" in again.stdout
    listed = await cli(workdir, "grants", "list", "--store", str(db))
    assert listed.stdout.strip() == "no live grants (--all shows ended ones)"
    as_json = await cli(workdir, "grants", "list", "--store", str(db), "--json", "--all")
    revoked = json.loads(as_json.stdout)[1]
    assert (revoked["status"], revoked["revoked_by"]) == ("revoked", "bob")
    table = await cli(workdir, "grants", "list", "--store", str(db), "--all")
    assert table.stdout.splitlines()[2].endswith("revoked by bob")


async def test_failures_are_one_line_with_their_status(workdir: Path) -> None:
    db = workdir / "runs.db"
    await _store_with_grants(db)
    unknown = await cli(workdir, "grants", "revoke", "nope", "--store", str(db))
    assert unknown.returncode == 14
    assert unknown.stderr.strip() == "error: no grant with id 'nope' in the store"
    missing = await cli(workdir, "grants", "list", "--store", str(workdir / "none.db"))
    assert missing.returncode == 8 and len(missing.stderr.strip().splitlines()) == 1
    no_verb = await cli(workdir, "grants", "--store", str(db))
    assert no_verb.returncode == 2 and "list" in no_verb.stderr
    no_store = await cli(workdir, "grants", "list")
    assert no_store.returncode == 2 and "--store" in no_store.stderr
    nobody = await cli(workdir, "grants", "revoke", "a1b2c3d4e5f6", "--db", str(db), "--as", " ")
    assert nobody.returncode == 2 and nobody.stderr.strip() == "error: --as needs a name"
    memory = await cli(workdir, "grants", "list", "--store", "memory:")
    assert memory.returncode == 1 and "memory: store is new and empty" in memory.stderr
