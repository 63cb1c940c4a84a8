"""Who may answer: ``PathPolicy`` (agent-path globs per identity, and who may approve which
tool) and ``load_policy`` (a policy named ``MODULE:ATTR`` on a command line).

The protocol (``AnswerPolicy``) and the check every answering path makes
(``hpd_agent.backend.check_policy``) are the core's; a refusal is an ``AnswerRefusedError``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Any, cast

from .._values.records import RequestRecord
from .._values.refs import load_ref
from ..backend import AnswerPolicy
from ..events import format_path
from ..exceptions import UserError
from ..text import error_text, shown

__all__ = ["PathPolicy", "load_policy"]


def _globs(where: str, value: object) -> tuple[str, ...]:
    """``value`` as a tuple of strings, or ``UserError`` naming ``where``."""
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise UserError(f"PathPolicy: {where} must be a list of strings, got {shown(value)}")
    items = tuple(cast(Sequence[object], value))
    if not all(isinstance(item, str) and item for item in items):
        raise UserError(f"PathPolicy: {where} must hold non-empty strings, got {shown(value)}")
    return cast(tuple[str, ...], items)


class PathPolicy:
    """Who may answer which request, by agent path and, for permissions, by tool.

    ``PathPolicy({"alice": ["*"], "bob": ["Orchestrator > Writer*"]},
    permissions={"deploy": ["alice"]})``: alice may answer anything; bob only requests of
    agents whose path (as people read it, ``Orchestrator > Writer``; ``fnmatch`` globs,
    case-sensitive) matches ``Orchestrator > Writer*``; only alice may approve, deny or
    decline the ``deploy`` tool's permission requests (a listed tool needs both rules). An
    identity the rules do not name may answer nothing.

    Args:
        rules: Identity → the agent-path globs it may answer (``"*"``: every path).
        permissions: Tool name → the identities who may decide its permission requests;
            a tool not listed follows ``rules`` alone.

    Raises:
        UserError: A rule is not a list of non-empty strings.
    """

    def __init__(
        self,
        rules: Mapping[str, Sequence[str]],
        *,
        permissions: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self.rules = {who: _globs(f"rules[{who!r}]", globs) for who, globs in rules.items()}
        self.permissions = {
            tool: frozenset(_globs(f"permissions[{tool!r}]", names))
            for tool, names in (permissions or {}).items()
        }

    def allows(self, identity: str, request: RequestRecord) -> bool | str:
        """True when ``identity`` may answer ``request``; else why not."""
        globs = self.rules.get(identity)
        if globs is None:
            return f"the policy does not name {shown(identity)}"
        path = format_path(request.agent_path)
        if not any(fnmatchcase(path, glob) for glob in globs):
            return f"{shown(identity)} may answer only {', '.join(map(repr, globs))}"
        if request.kind == "permission":
            tool = request.payload.get("tool_name")
            allowed = self.permissions.get(tool) if isinstance(tool, str) else None
            if allowed is not None and identity not in allowed:
                names = ", ".join(sorted(allowed)) or "nobody"
                return f"only {names} may decide {shown(tool)}"
        return True

    def __repr__(self) -> str:
        return f"PathPolicy({self.rules!r}, permissions={self.permissions!r})"


def load_policy(ref: str) -> AnswerPolicy:
    """The policy at ``MODULE:ATTR`` (or ``script.py:ATTR``): an object with ``allows``, or
    a class or function that returns one when called with no arguments.

    Raises:
        UserError: It cannot be loaded, or is no policy (the message says which).
    """
    try:
        target: Any = load_ref(ref)
    except ValueError:
        raise UserError(f"--policy {ref!r}: expected MODULE:ATTR or script.py:ATTR") from None
    except Exception as e:  # the user's module: any error while importing it
        raise UserError(f"--policy {ref!r}: cannot load it: {error_text(e)}") from None
    if isinstance(target, type) or not callable(getattr(target, "allows", None)):
        try:
            target = target() if callable(target) else target
        except Exception as e:
            raise UserError(f"--policy {ref!r}: calling it failed: {error_text(e)}") from None
    if not callable(getattr(target, "allows", None)):
        raise UserError(
            f"--policy {ref!r} is a {type(target).__name__}, not a policy (an object with "
            "allows(identity, request))"
        )
    return target
