"""What the SQL stores share: the schema and the row <-> record mapping.

Both SQL stores keep JSON as text columns, so one mapping serves SQLite and PostgreSQL; only
the placeholder style and the float column type differ.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, cast

from ._base import JournalEntry, RequestRecord, RunRecord, dump_json

__all__ = [
    "REQUEST_COLUMNS",
    "RUN_COLUMNS",
    "journal_from_row",
    "record_from_row",
    "record_to_row",
    "run_from_row",
    "run_to_row",
    "schema",
]

REQUEST_COLUMNS = (
    "id, run_id, agent_path, kind, question, payload, options, status, answer, "
    "created_at, answered_at, expires_at, context"
)
RUN_COLUMNS = "run_id, agent_name, prompt, history, status, output, error, created_at, updated_at"


def schema(real: str) -> list[str]:
    """The DDL statements, with ``real`` as the floating-point column type."""
    return [
        f"""CREATE TABLE IF NOT EXISTS hpd_requests (
            id TEXT PRIMARY KEY,
            run_id TEXT NOT NULL,
            agent_path TEXT NOT NULL,
            kind TEXT NOT NULL,
            question TEXT NOT NULL,
            payload TEXT NOT NULL,
            options TEXT,
            status TEXT NOT NULL,
            answer TEXT,
            created_at {real} NOT NULL,
            answered_at {real},
            expires_at {real},
            context TEXT NOT NULL
        )""",
        "CREATE INDEX IF NOT EXISTS hpd_requests_by_status ON hpd_requests (status, created_at)",
        "CREATE INDEX IF NOT EXISTS hpd_requests_by_run ON hpd_requests (run_id)",
        "CREATE INDEX IF NOT EXISTS hpd_requests_by_answered ON hpd_requests (answered_at)",
        """CREATE TABLE IF NOT EXISTS hpd_journal (
            run_id TEXT NOT NULL,
            key TEXT NOT NULL,
            kind TEXT NOT NULL,
            value TEXT NOT NULL,
            PRIMARY KEY (run_id, key)
        )""",
        f"""CREATE TABLE IF NOT EXISTS hpd_runs (
            run_id TEXT PRIMARY KEY,
            agent_name TEXT NOT NULL,
            prompt TEXT NOT NULL,
            history TEXT NOT NULL,
            status TEXT NOT NULL,
            output TEXT,
            error TEXT,
            created_at {real} NOT NULL,
            updated_at {real} NOT NULL
        )""",
    ]


def record_to_row(r: RequestRecord) -> tuple[Any, ...]:
    """The column values of a request, in ``REQUEST_COLUMNS`` order."""
    return (
        r.id,
        r.run_id,
        json.dumps(list(r.agent_path)),
        r.kind,
        r.question,
        dump_json(r.payload),
        None if r.options is None else json.dumps(list(r.options)),
        r.status,
        None if r.status != "answered" else dump_json(r.answer),
        r.created_at,
        r.answered_at,
        r.expires_at,
        dump_json(r.context),
    )


def record_from_row(row: Sequence[Any]) -> RequestRecord:
    """A request from its columns in ``REQUEST_COLUMNS`` order."""
    options = None if row[6] is None else tuple(cast(list[str], json.loads(row[6])))
    return RequestRecord(
        id=row[0],
        run_id=row[1],
        agent_path=tuple(json.loads(row[2])),
        kind=row[3],
        question=row[4],
        payload=json.loads(row[5]),
        options=options,
        status=row[7],
        answer=None if row[8] is None else json.loads(row[8]),
        created_at=row[9],
        answered_at=row[10],
        expires_at=row[11],
        context=json.loads(row[12]),
    )


def journal_from_row(row: Sequence[Any]) -> JournalEntry:
    """A journal entry from (key, kind, value)."""
    return JournalEntry(key=row[0], kind=row[1], value=json.loads(row[2]))


def run_to_row(r: RunRecord) -> tuple[Any, ...]:
    """The column values of a run, in ``RUN_COLUMNS`` order."""
    return (
        r.run_id,
        r.agent_name,
        r.prompt,
        dump_json(list(r.history)),
        r.status,
        r.output,
        r.error,
        r.created_at,
        r.updated_at,
    )


def run_from_row(row: Sequence[Any]) -> RunRecord:
    """A run from its columns in ``RUN_COLUMNS`` order."""
    return RunRecord(
        run_id=row[0],
        agent_name=row[1],
        prompt=row[2],
        history=json.loads(row[3]),
        status=row[4],
        output=row[5],
        error=row[6],
        created_at=row[7],
        updated_at=row[8],
    )
