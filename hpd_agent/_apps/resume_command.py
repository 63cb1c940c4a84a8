"""``hpd-agent resume RUN_ID --store URL``: continue a run journaled in a store.

What the run already did is replayed from its journal; a question still pending is answered
with ``--answer`` (as ``--as NAME``, channel ``cli``) or from anywhere with ``hpd-agent
answer`` while this waits. Failures are the store commands' (``cli_store.failure``).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import TYPE_CHECKING, Any

from .._core.output import output_text
from ..events import format_path
from ..text import printable
from .cli_parser import add_durability_option, store_option
from .cli_store import (
    _AGENT_FORMS,
    _STORE_HELP,
    EXIT_AGENT,
    EXIT_NO_RUN,
    EXIT_PENDING,
    EXIT_UNKNOWN_REQUEST,
    EXIT_USAGE,
    _db_hint,
    _Fail,
    _numbered,
    _open,
    _schema_options,
    _show,
    _typed_answer,
    answerer,
    load_agent,
    print_pending,
)

if TYPE_CHECKING:
    from ..agent import Agent
    from ..store import Store

__all__ = ["add_resume_command"]


def add_resume_command(sub: Any) -> None:
    """Register ``resume`` on the CLI's subparsers."""
    resume = sub.add_parser(
        "resume",
        help="continue a run journaled in a store",
        description=(
            "Continue a run journaled in a store from where it stopped (a crash, an "
            "interrupt, a question nobody answered): what it already did is replayed from the "
            "journal, not done again. A question still pending is answered with --answer, or "
            "with `hpd-agent answer` from anywhere while this waits."
        ),
    )
    resume.add_argument("run_id", metavar="RUN_ID", help="the run, as `pending` lists it")
    store_option(resume, _STORE_HELP, required=True)
    resume.add_argument(
        "--agent",
        metavar="MODULE:ATTR",
        help="the root Agent, or a function returning it, as package.module:NAME or "
        "path/to/script.py:NAME (default: the one the run recorded; a module is looked up "
        "in the current directory first)",
    )
    resume.add_argument(
        "--answer",
        action="append",
        default=[],
        metavar="REQUEST_ID=TEXT",
        help="answer a pending request before resuming (repeatable; an option by its number, "
        "1 is the first, or by its text)",
    )
    resume.add_argument(
        "--as",
        dest="as_name",
        metavar="NAME",
        help="who gives the --answer answers (default: the operating-system user)",
    )
    resume.add_argument(
        "--interrupt",
        action="store_true",
        help="stop with status 'interrupted' at the next unanswered question instead of waiting",
    )
    resume.add_argument(
        "--max-age",
        type=float,
        metavar="SECONDS",
        help="expire this run's pending requests older than SECONDS",
    )
    resume.add_argument(
        "--no-wait",
        action="store_true",
        help="exit at once (status 13) if another process's lease on the run is live, "
        "instead of waiting for it to expire",
    )
    add_durability_option(resume)
    resume.set_defaults(func=_cmd_resume)


async def _agent_of(store: Store, run_id: str, given: str | None) -> Agent:
    """The root agent of ``run_id``: the one it recorded, or ``given`` if it matches the run.

    A run that recorded no reference takes ``given`` (its name must match) and records it.
    """
    record = await store.get_run(run_id)
    if record is None:
        raise _Fail(EXIT_NO_RUN, f"no run {run_id!r} in {store!r}")
    recorded = record.agent_ref
    if given is not None and recorded is not None and given != recorded:
        raise _Fail(
            EXIT_AGENT,
            f"run {run_id} belongs to agent {recorded}, not --agent {given}: "
            "resume it with its own agent",
        )
    ref = given or recorded
    if ref is None:
        raise _Fail(
            EXIT_AGENT,
            f"run {run_id} does not record where its agent {record.agent_name!r} is defined "
            f"(it was not a global of the module or script that started the run): "
            f"pass {_AGENT_FORMS}",
        )
    agent = load_agent(ref, recorded=given is None)
    if agent.name != record.agent_name:
        raise _Fail(
            EXIT_AGENT,
            f"run {run_id} was started by agent {record.agent_name!r}, "
            f"but --agent {ref} is {agent.name!r}",
        )
    if recorded is None:
        await store.put_run(dataclasses.replace(record, agent_ref=ref))
    return agent


def _parse_answers(items: list[str]) -> dict[str, Any]:
    answers: dict[str, Any] = {}
    for item in items:
        request_id, sep, text = item.partition("=")
        if not sep:
            raise _Fail(EXIT_USAGE, f"--answer must be REQUEST_ID=TEXT, got {item!r}")
        answers[request_id] = text
    return answers


def _cmd_resume(args: argparse.Namespace) -> int:
    import anyio

    from ..backend import Author, Authored
    from ..exceptions import RunLeasedError, UnknownRequestError

    answers = _parse_answers(args.answer)

    async def main() -> int:
        store = _open(args.store)
        policy = "interrupt" if args.interrupt else None
        try:
            agent = await _agent_of(store, args.run_id, args.agent)
            author = Author(answerer(args)[0], "cli")
            for request_id, text in answers.items():
                typed = _typed_answer(await store.get_request(request_id), text)
                answers[request_id] = Authored(typed, author)

            async def resume(wait: bool) -> Any:
                return await agent.resume(
                    args.run_id,
                    store=store,
                    answers=answers,
                    on_unhandled=policy,
                    max_age=args.max_age,
                    handler=None if args.interrupt else _StoreNotice(args.store),
                    wait=wait,
                    durability=args.durability,
                )

            try:
                result = await resume(False)
            except RunLeasedError as e:
                if args.no_wait or e.lost:  # waiting is for a refusal (nothing written)
                    raise
                _say_waiting(e)
                result = await resume(True)
        except UnknownRequestError as e:
            # 3 means "questions pending" for resume: an unknown --answer id has its own.
            raise _Fail(EXIT_UNKNOWN_REQUEST, str(e)) from None
        finally:
            await store.aclose()
        if result.status == "interrupted":
            print_pending(result.pending)
            return EXIT_PENDING
        if result.error is not None:
            raise result.error
        print(printable(output_text(result.output) or ""))
        return 0

    return anyio.run(main)


def _say_waiting(error: Any) -> None:
    """Say on stderr that ``resume`` waits for another process's live lease."""
    import time

    left = max(0.0, error.expires_at - time.time())
    print(
        f"run {error.run_id} is driven by another process (lease held by {error.holder}): "
        f"waiting up to {left:.1f} s for its lease to expire (--no-wait exits at once)",
        file=sys.stderr,
        flush=True,
    )


class _StoreNotice:
    """Tells on stderr which questions wait; the answers come through the store."""

    def __init__(self, db: str) -> None:
        self.db = db

    async def on_event(self, event: Any) -> None:
        from ..events import ClarificationRequest
        from ..questions import answer_prompt

        if isinstance(event, ClarificationRequest) and not event.replayed:
            agent = format_path(event.agent_path)
            options = event.options or _schema_options(event)
            listed = f"  {_numbered(options)}" if options else ""
            print(
                _show(f"waiting for {event.request_id} ({agent}): {event.question}{listed}")
                + f"\n  {_show(str(answer_prompt(event)))}"
                + f"\n  answer with: hpd-agent answer {event.request_id} TEXT "
                f"--store {_db_hint(self.db)} (or --decline instead of TEXT)",
                file=sys.stderr,
                flush=True,
            )

    async def on_request(self, request: Any) -> Any:
        import anyio

        # Never answers here: the answer arrives through the store and resolves the request,
        # which cancels this wait.
        await anyio.sleep_forever()
