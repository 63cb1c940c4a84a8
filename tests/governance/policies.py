"""Policies named ``MODULE:ATTR`` by the governance tests (``load_policy``, ``--policy``)."""

from __future__ import annotations

from hpd_agent.governance import PathPolicy
from hpd_agent.store import RequestRecord

TEAM = PathPolicy(
    {"alice": ["*"], "bob": ["Orchestrator > Writer*", "Ops"]}, permissions={"deploy": ["alice"]}
)
"""alice answers anything; bob only the Writer's questions and the Ops agent's requests, but
only alice decides ``deploy``."""


class OnlyAlice:
    """A policy class (``load_policy`` builds one)."""

    def allows(self, identity: str, request: RequestRecord) -> bool | str:
        return identity == "alice" or "only alice answers here"


def team() -> PathPolicy:
    """A factory returning the team policy."""
    return TEAM


NOT_A_POLICY = 42


def broken() -> PathPolicy:
    raise RuntimeError("no policy today")
