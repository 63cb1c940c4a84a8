"""Answers to an interrupted run's requests, carried by an AG-UI ``resume`` list.

All or nothing: every entry is checked first (each names an open interrupt of this thread's
run, every open interrupt is addressed once, each resolved payload fits its request), and only
then are the answers written through the store. A refused resume changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from ag_ui.core import ResumeEntry

from ..exceptions import InvalidAnswerError, RequestError
from ..store import Store, respond
from ._requests import check_web_answer

__all__ = ["ResumeRefused", "apply_resume"]


class ResumeRefused(Exception):
    """The resume list was refused; ``code`` says why in a word, the message in a sentence."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


async def apply_resume(store: Store, run_id: str, entries: Sequence[ResumeEntry]) -> None:
    """Check every entry against the run's open requests, then write them all.

    Raises:
        ResumeRefused: An unknown or repeated interrupt id, an open interrupt left out, or an
            invalid payload; nothing was written.
    """
    open_ = {r.request_id: r for r in await store.list_requests(run_id=run_id)}
    seen: set[str] = set()
    answers: list[tuple[str, str, object]] = []
    for entry in entries:
        rid = entry.interrupt_id
        if rid not in open_:
            raise ResumeRefused(
                f"unknown interrupt {rid!r}: not open on this thread", "unknown_interrupt"
            )
        if rid in seen:
            raise ResumeRefused(f"interrupt {rid!r} is answered twice", "duplicate_interrupt")
        seen.add(rid)
        if entry.status == "cancelled":
            answers.append((rid, "cancelled", None))
            continue
        try:
            answers.append((rid, "answered", check_web_answer(open_[rid], entry.payload)))
        except InvalidAnswerError as e:
            raise ResumeRefused(
                f"invalid payload for interrupt {rid!r}: {e}", "invalid_payload"
            ) from None
    missing = sorted(set(open_) - seen)
    if missing:
        raise ResumeRefused(
            "resume must address every open interrupt; missing: " + ", ".join(missing),
            "missing_interrupts",
        )
    for rid, status, value in answers:
        try:
            if status == "cancelled":
                await store.resolve(rid, "cancelled")
            else:
                await respond(store, rid, value, context={"channel": "ag-ui"})
        except RequestError as e:  # answered elsewhere meanwhile
            raise ResumeRefused(str(e), "conflict") from None
