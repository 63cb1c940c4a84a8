"""The words a human answers with: one list of yes and no, shared by every part that reads
a typed reply (confirmations, permissions, plan approvals, the console).

Each set holds whole replies after ``strip().casefold()``.
"""

from __future__ import annotations

__all__ = [
    "APPROVE_ALWAYS_WORDS",
    "APPROVE_RUN_WORDS",
    "APPROVE_WORDS",
    "DECLINED_WORDS",
    "DONE_WORDS",
    "NO_WORDS",
    "REJECT_WORDS",
    "YES_WORDS",
    "normalise",
]

YES_WORDS: frozenset[str] = frozenset({"yes", "y", "true", "ok", "sure"})
"""Replies meaning yes."""
NO_WORDS: frozenset[str] = frozenset({"no", "n", "false"})
"""Replies meaning no."""
DONE_WORDS: frozenset[str] = YES_WORDS | {"done"}
"""Replies saying an action was completed."""
DECLINED_WORDS: frozenset[str] = NO_WORDS | {"declined", "decline"}
"""Replies saying an action was declined."""
APPROVE_WORDS: frozenset[str] = YES_WORDS | {"approve", "approved", "allow", "accept", "once"}
"""Replies approving (a tool call once, a plan, a produced value)."""
APPROVE_RUN_WORDS: frozenset[str] = frozenset(
    {"run", "all", "approve for run", "approve for the run", "yes to all"}
)
"""Replies approving a tool for the rest of the run."""
APPROVE_ALWAYS_WORDS: frozenset[str] = frozenset(
    {"always", "approve always", "always approve", "remember"}
)
"""Replies approving a tool from now on: a remembered grant (``Approve(scope="always")``)."""
REJECT_WORDS: frozenset[str] = NO_WORDS | {"deny", "denied", "reject", "rejected", "cancel"}
"""Replies refusing (a tool call, a plan, a produced value)."""


def normalise(reply: str) -> str:
    """A reply as the word sets are matched against it: stripped, case-folded."""
    return reply.strip().casefold()
