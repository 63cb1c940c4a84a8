"""``TaskView``: what the client knows of one remote task, from the events it has read."""

from __future__ import annotations

from typing import Any

from a2a.types import Artifact, Message, Role, StreamResponse, Task, TaskState, TaskStatus

from ._wire import INTERRUPTED, TERMINAL, artifacts_text, message_text, struct_dict

__all__ = ["TaskView"]


class TaskView:
    """The remote task as the events read so far show it: its ids, its status (and the
    metadata of the event that brought it), its artifacts and the last agent message.

    A remote may also answer a query with a single message and no task: ``reply`` holds
    its text then.
    """

    __slots__ = (
        "artifacts",
        "context_id",
        "last_agent_text",
        "reply",
        "status",
        "status_metadata",
        "task_id",
    )

    def __init__(self) -> None:
        self.task_id = ""
        self.context_id = ""
        self.status = TaskStatus(state=TaskState.TASK_STATE_SUBMITTED)
        self.status_metadata: dict[str, Any] = {}
        self.artifacts: dict[str, Artifact] = {}
        self.last_agent_text: str | None = None
        self.reply: str | None = None

    @property
    def state(self) -> TaskState:
        """The task's last known state."""
        return self.status.state

    def take(self, event: StreamResponse) -> None:
        """Take in one event of a stream (or a unary response, as one)."""
        if event.HasField("task"):
            self.take_task(event.task)
        elif event.HasField("status_update"):
            update = event.status_update
            self.note_ids(update.task_id, update.context_id)
            self._status(update.status, struct_dict(update.metadata))
        elif event.HasField("artifact_update"):
            update = event.artifact_update
            self.note_ids(update.task_id, update.context_id)
            self._artifact(update.artifact, append=update.append)
        elif event.HasField("message"):
            self._agent_message(event.message)
            if not self.task_id:
                self.reply = message_text(event.message)

    def take_task(self, task: Task) -> None:
        """Take in a whole task (a snapshot: ``GetTask``, or the first event of a stream)."""
        self.note_ids(task.id, task.context_id)
        for message in task.history:
            self._agent_message(message)
        self.artifacts = {a.artifact_id: a for a in task.artifacts}
        self._status(task.status, {})

    def expect_change(self) -> None:
        """A message was just sent: until the remote says otherwise, the task is working."""
        self.status = TaskStatus(state=TaskState.TASK_STATE_WORKING)
        self.status_metadata = {}

    def result_text(self) -> str:
        """A completed task's result: its artifacts' text, else the last agent message's."""
        text = artifacts_text(list(self.artifacts.values()))
        if text:
            return text
        return self.last_agent_text or ""

    @property
    def terminal(self) -> bool:
        """The task has ended (completed, failed, rejected, canceled)."""
        return self.state in TERMINAL

    def note_ids(self, task_id: str, context_id: str) -> None:
        """The task's ids, when not known yet."""
        if task_id and not self.task_id:
            self.task_id = task_id
        if context_id and not self.context_id:
            self.context_id = context_id

    def _status(self, status: TaskStatus, metadata: dict[str, Any]) -> None:
        self.status = status
        self.status_metadata = metadata
        if status.HasField("message") and status.state not in INTERRUPTED:
            self._agent_message(status.message)  # a question is not a result

    def _artifact(self, artifact: Artifact, *, append: bool) -> None:
        known = self.artifacts.get(artifact.artifact_id)
        if append and known is not None:
            merged = Artifact()
            merged.CopyFrom(known)
            merged.parts.extend(artifact.parts)
            self.artifacts[artifact.artifact_id] = merged
        else:
            self.artifacts[artifact.artifact_id] = artifact

    def _agent_message(self, message: Message) -> None:
        if message.role == Role.ROLE_AGENT:
            text = message_text(message)
            if text:
                self.last_agent_text = text
