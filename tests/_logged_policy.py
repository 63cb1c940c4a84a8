"""An answer policy that writes a line per question it is asked, for the tests that count
how often a server consults a policy (a policy may query a directory or write a log: it is
asked once per answer)."""

from __future__ import annotations

import os
from pathlib import Path

from hpd_agent.governance import AnswerPolicy
from hpd_agent.store import RequestRecord


class LoggedPolicy:
    """``inner``'s verdicts; each question appended as ``identity request_id`` to the file
    named by the environment variable ``log_env`` (read when asked: the server's child
    process gets it from the test)."""

    def __init__(self, inner: AnswerPolicy, log_env: str) -> None:
        self.inner = inner
        self.log_env = log_env

    def allows(self, identity: str, request: RequestRecord) -> bool | str:
        with Path(os.environ[self.log_env]).open("a") as log:
            log.write(f"{identity} {request.request_id}\n")
        return self.inner.allows(identity, request)


def asked(log: Path) -> list[str]:
    """The lines a ``LoggedPolicy`` wrote to ``log`` (none if it was never asked)."""
    return log.read_text().splitlines() if log.exists() else []
