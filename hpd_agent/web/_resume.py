"""Answers to an interrupted run's requests, carried by an AG-UI ``resume`` list.

All or nothing: every entry is checked first (each names an open interrupt of this thread's
run, every open interrupt is addressed once, the server's answer policy lets the caller
answer it, each resolved payload fits its request). Nothing
is written here: the checked answers go to ``resume_stream(answers=...)``, which writes them
once it holds the run's lease (so a resume refused by another holder's lease changes nothing).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ag_ui.core import ResumeEntry

from ..backend import AnswerPolicy, check_policy
from ..exceptions import AnswerRefusedError, InvalidAnswerError
from ..store import CANCEL_REQUEST, Store
from ._requests import check_web_answer

__all__ = ["ResumeRefused", "check_resume"]


class ResumeRefused(Exception):
    """The resume list was refused; ``code`` says why in a word, the message in a sentence."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


async def check_resume(
    store: Store,
    run_id: str,
    entries: Sequence[ResumeEntry],
    *,
    by: str | None = None,
    policy: AnswerPolicy | None = None,
) -> dict[str, Any]:
    """Check every entry against the run's open requests: the answers to give the run
    (``CANCEL_REQUEST`` for a cancelled interrupt), nothing written.

    Raises:
        ResumeRefused: An unknown or repeated interrupt id, an open interrupt left out, one
            ``policy`` does not let ``by`` answer (or cancel), or an invalid payload.
    """
    open_ = {r.request_id: r for r in await store.list_requests(run_id=run_id)}
    answers: dict[str, Any] = {}
    for entry in entries:
        rid = entry.interrupt_id
        if rid not in open_:
            raise ResumeRefused(
                f"unknown interrupt {rid!r}: not open on this thread", "unknown_interrupt"
            )
        if rid in answers:
            raise ResumeRefused(f"interrupt {rid!r} is answered twice", "duplicate_interrupt")
        try:
            check_policy(policy, by, open_[rid])
        except AnswerRefusedError as e:
            raise ResumeRefused(str(e), "not_allowed") from None
        if entry.status == "cancelled":
            answers[rid] = CANCEL_REQUEST
            continue
        try:
            answers[rid] = check_web_answer(open_[rid], entry.payload)
        except InvalidAnswerError as e:
            raise ResumeRefused(
                f"invalid payload for interrupt {rid!r}: {e}", "invalid_payload"
            ) from None
    missing = sorted(set(open_) - set(answers))
    if missing:
        raise ResumeRefused(
            "resume must address every open interrupt; missing: " + ", ".join(missing),
            "missing_interrupts",
        )
    return answers
