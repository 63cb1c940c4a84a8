"""``RemoteAgentError``: a remote agent could not do what it was asked."""

from __future__ import annotations

from ..exceptions import HpdAgentError

__all__ = ["RemoteAgentError"]


class RemoteAgentError(HpdAgentError):
    """A remote agent (``RemoteAgent``) failed the call: its task failed, was rejected or
    canceled, it needs an authentication nobody gave, or it could not be reached.

    Raised inside the remote agent's tool, it becomes that tool's error result for the
    calling model (``"Error: RemoteAgentError: the remote task failed: ..."``).

    Attributes:
        state: The remote task's last state (``"failed"``, ``"rejected"``, ``"canceled"``,
            ``"auth-required"``, ...), or None when there was no task.
        task_id: The remote task's id, when there was one.
    """

    def __init__(self, message: str, *, state: str | None = None, task_id: str | None = None):
        super().__init__(message)
        self.state = state
        self.task_id = task_id
