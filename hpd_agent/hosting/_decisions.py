"""A permission request's answer as every adapter offers it: three options, one mapping.

A client is offered ``approve_once``, ``approve_run`` and ``deny`` (``PERMISSION_OPTIONS``,
in the order a client shows them): MCP as a form's ``decision`` enum, A2A as a ``choice``,
ACP as ``session/request_permission`` options of kinds ``allow_once``, ``allow_always`` and
``reject_once``. The option a client picks becomes the decision ``run.respond`` takes
(``decision_of``); a client that dismisses the request declines it (``hpd_agent.Decline``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..permissions import Approve, Deny

__all__ = ["DECISIONS", "PERMISSION_OPTIONS", "PermissionOption", "decision_of"]


@dataclass(frozen=True, slots=True)
class PermissionOption:
    """One answer a client may give a permission request.

    Attributes:
        id: Its id on every wire (``"approve_once"``).
        label: What a person reads.
        acp_kind: Its kind in the Agent Client Protocol (``allow_once``, ``allow_always``,
            ``reject_once``).
    """

    id: str
    label: str
    acp_kind: str


PERMISSION_OPTIONS = (
    PermissionOption("approve_once", "Approve once", "allow_once"),
    PermissionOption("approve_run", "Approve for the rest of the run", "allow_always"),
    PermissionOption("deny", "Deny", "reject_once"),
)
"""The options of a permission request, in the order a client shows them."""

DECISIONS = tuple(option.id for option in PERMISSION_OPTIONS)
"""The option ids: ``("approve_once", "approve_run", "deny")``."""


def decision_of(option: object, *, by: str = "the client") -> Approve | Deny | None:
    """The decision a picked option stands for, or None when ``option`` is none of
    ``DECISIONS`` (spaces and case aside); ``by`` names who denied (the ``Deny``'s reason:
    ``"denied by the MCP client"``)."""
    if not isinstance(option, str):
        return None
    picked = option.strip().lower()
    if picked == "approve_once":
        return Approve(scope="once")
    if picked == "approve_run":
        return Approve(scope="run")
    if picked == "deny":
        return Deny(reason=f"denied by {by}")
    return None
