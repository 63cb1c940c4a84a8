"""The ``hpd-agent`` commands on a durable store: ``pending``, ``answer`` and ``resume``.

Each failure is a ``_Fail`` (or an hpd_agent error) that ``failure`` turns into one line and
its exit status; the table of statuses is in ``hpd_agent.cli``'s docstring.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import sys
from typing import TYPE_CHECKING, Any, cast

from .._core.output import output_text
from ..events import format_path
from ..text import error_text, printable
from .cli_parser import store_option
from .extras import MissingExtraError, needs_store_extra

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..agent import Agent
    from ..events import ClarificationRequest, RequestEvent
    from ..store import RequestRecord, Store

__all__ = ["EXIT_INTERRUPTED", "add_store_commands", "failure", "print_pending"]

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_PENDING = 75  # `resume --interrupt` stopped at an unanswered question: not an error
EXIT_STORE_UNAVAILABLE = 8
EXIT_STORE_CORRUPT = 9
EXIT_AGENT = 10
EXIT_NO_RUN = 11
EXIT_UNKNOWN_REQUEST = 12
EXIT_LEASED = 13  # `resume`: another process drives the run (it holds the run's lease)
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130


class _Fail(Exception):
    """A CLI failure: one line for stderr and its exit status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


# Exit statuses of a refused answer, one per refusal, so scripts can tell them apart.
_REFUSALS = {
    "UnknownRequestError": 3,
    "RequestAlreadyAnsweredError": 4,
    "RequestExpiredError": 5,
    "RequestCancelledError": 6,
    "InvalidAnswerError": 7,
}


_STORE_HELP = (
    "the store: a SQLite file (it must exist), a postgresql:// DSN, or a location of a "
    "registered scheme (--db is the same option)"
)


def add_store_commands(sub: Any) -> None:
    """Register ``pending``, ``answer`` and ``resume`` on the CLI's subparsers."""
    pending = sub.add_parser(
        "pending",
        help="list requests waiting for an answer in a store",
        description=(
            "List the questions and permission requests waiting for an answer in a store, "
            "one a line: its request id, its run, the asking agent's path, what it wants and "
            "how to type an answer. `hpd-agent answer` answers one."
        ),
    )
    store_option(pending, _STORE_HELP, required=True)
    pending.add_argument("--run", metavar="RUN_ID", help="only this run's requests")
    pending.add_argument(
        "--json",
        action="store_true",
        help="one JSON object per line (request_id, run_id, agent_path, kind, question, options, "
        "created_at, expires_at, label, answer_schema)",
    )
    pending.set_defaults(func=_cmd_pending)
    _add_answer_command(sub)
    _add_resume_command(sub)


def _add_resume_command(sub: Any) -> None:
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
    resume.set_defaults(func=_cmd_resume)


def _add_answer_command(sub: Any) -> None:
    answer = sub.add_parser(
        "answer",
        help="answer (or decline) a pending request in a store",
        description=(
            "Answer (or decline) one pending request in a store, by its id as `pending` lists "
            "it. The run that asked goes on with the answer: at once if it is running, else "
            "when it is resumed."
        ),
    )
    answer.add_argument(
        "request_id", metavar="REQUEST_ID", help="the request, as `pending` lists it"
    )
    answer.add_argument(
        "text",
        metavar="TEXT",
        nargs="?",
        help="the answer: text, or an option's number as `pending` lists it (1 is the first); "
        "with --json a JSON value, e.g. true, where an int is a 0-based option index",
    )
    store_option(answer, _STORE_HELP, required=True)
    answer.add_argument("--json", action="store_true", help="parse the answer as JSON")
    answer.add_argument(
        "--decline",
        action="store_true",
        help="decline to answer, instead of TEXT: the request ends declined and the asking "
        "agent is told so (any request, a permission request too)",
    )
    answer.add_argument("--sender", help="who answers (kept with the answer)")
    answer.set_defaults(func=_cmd_answer)


def _open(db: str) -> Store:
    """The store at ``db``; an existing one only (a mistyped path must not make a new one)."""
    from ..store import open_store

    needs_store_extra(db)
    return open_store(db, create=False)


def _db_hint(db: str) -> str:
    """``db`` as a command to copy shows it: a DSN (it may hold a password) as ``DSN``."""
    return "DSN" if "://" in db else db


def _show(text: str) -> str:
    """Stored text made safe for one line of the terminal (no escapes, no fake rows)."""
    return printable(text, one_line=True)


def _event_of(r: RequestRecord) -> RequestEvent | None:
    """The record's request event; None for a payload that is no request (``answer`` names
    what is wrong with it; ``pending`` still lists the record)."""
    from ..exceptions import StoreCorruptError

    try:
        return r.event
    except StoreCorruptError:
        return None


def _print_request(r: RequestRecord, as_json: bool) -> None:
    from ..events import ClarificationRequest
    from ..questions import answer_prompt, answer_schema_of

    event = _event_of(r)
    question = event if isinstance(event, ClarificationRequest) else None
    if as_json:
        item = {
            "request_id": r.request_id,
            "id": r.request_id,  # deprecated spelling of request_id, kept for one release
            "run_id": r.run_id,
            "agent_path": list(r.agent_path),
            "kind": r.kind,
            "question": r.question,
            "options": None if r.options is None else list(r.options),
            "created_at": r.created_at,
            "expires_at": r.expires_at,
            # The words every surface uses (``answer_prompt``): "Choose one", "Permission"...
            "label": None if event is None else answer_prompt(event).label,
            "answer_schema": None if question is None else answer_schema_of(question),
        }
        print(json.dumps(item))  # ASCII JSON: controls and surrogates are escaped
        return
    options = r.options or _schema_options(question)
    listed = f"  {_numbered(options)}" if options else ""
    print(_show(f"{r.request_id}  {r.run_id}  {format_path(r.agent_path)}  {r.question}{listed}"))
    if event is not None:  # what it wants, and what to type: the words every surface uses
        print(_show(f"    {answer_prompt(event)!s}"))


def _schema_options(question: ClarificationRequest | None) -> tuple[str, ...]:
    """The values a question of a kind of the app's own takes, when its schema lists them."""
    from ..questions import answer_schema_of

    enum = None if question is None else answer_schema_of(question).get("enum")
    return tuple(map(str, cast(list[Any], enum))) if isinstance(enum, list) else ()


def _numbered(options: tuple[str, ...]) -> str:
    """The options as a person picks them: ``1. Express  2. FastAPI``."""
    return "  ".join(f"{n}. {option}" for n, option in enumerate(options, 1))


def _typed_answer(record: RequestRecord | None, text: str) -> Any:
    """A typed answer as a person means it (``parse_typed``): a number picks the option
    listed with it (1 is the first, as ``pending`` shows), an option's text stays text, a
    question taking several options takes them separated by commas (``1,3``), and any kind
    reads by its own rules or its answer schema (``4`` for an integer). Text that cannot be
    read is a usage error; what is read is checked by the store."""
    from ..events import ClarificationRequest
    from ..questions import parse_typed

    if record is None or record.status != "pending":
        return text  # refused by the store, with its own message
    event = record.event  # a corrupt payload: the store's error, naming the request
    if not isinstance(event, ClarificationRequest):
        return text  # a permission: the decision words are read by the store
    try:
        return parse_typed(event, text)
    except ValueError as e:
        raise _Fail(EXIT_USAGE, f"request {record.request_id}: {e}") from None


def _cmd_pending(args: argparse.Namespace) -> int:
    import anyio

    from ..exceptions import StoreCorruptError
    from ..store._sql import SQLStore

    async def main() -> int:
        store = _open(args.store)
        errors: list[StoreCorruptError] = []
        try:
            if isinstance(store, SQLStore):
                records = await store.list_requests(run_id=args.run, errors=errors)
            else:
                records = await store.list_requests(run_id=args.run)
        finally:
            await store.aclose()
        for r in records:
            _print_request(r, args.json)
        for e in errors:
            print(f"error: {_show(str(e))}", file=sys.stderr)
        if records and not errors and not args.json:
            print(
                f"answer with: hpd-agent answer REQUEST_ID TEXT --store {_db_hint(args.store)} "
                "(--decline instead of TEXT declines it)",
                file=sys.stderr,
            )
        if not records and not errors and not args.json:
            print("no pending requests", file=sys.stderr)
        return EXIT_STORE_CORRUPT if errors else 0

    return anyio.run(main)


def _parse_json_answer(text: str) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        raise _Fail(EXIT_USAGE, "--json answer is nested too deeply") from None
    except ValueError as e:
        raise _Fail(EXIT_USAGE, f"--json answer is not valid JSON: {e}") from None


def _answer_value(args: argparse.Namespace) -> Any:
    """The answer ``answer`` gives: ``Decline()`` with ``--decline``, else TEXT (parsed with
    ``--json``); exactly one of them (a ``_Fail`` with the usage status otherwise)."""
    if args.decline:
        if args.text is not None or args.json:
            raise _Fail(EXIT_USAGE, "--decline takes no answer: give TEXT or --decline, not both")
        from ..questions import Decline

        return Decline()
    if args.text is None:
        raise _Fail(EXIT_USAGE, "give the answer TEXT, or --decline to decline the request")
    # --json is programmatic: an int picks an option by its 0-based index, as store.respond.
    return _parse_json_answer(args.text) if args.json else args.text


def _answered_line(request_id: str, value: Any, accepted: Any) -> str:
    """What ``answer`` prints once the answer (or decline) is taken."""
    from ..questions import Decline

    if isinstance(value, Decline):
        return f"declined {request_id}"
    return f"answered {request_id}: {json.dumps(accepted)}"


def _cmd_answer(args: argparse.Namespace) -> int:
    import anyio

    from ..store import respond

    value = _answer_value(args)
    context = {"channel": "cli"}
    if args.sender:
        context["sender"] = args.sender

    async def main() -> int:
        store = _open(args.store)
        try:
            typed = value
            if not args.json and not args.decline:
                typed = _typed_answer(await store.get_request(args.request_id), value)
            record = await respond(store, args.request_id, typed, context=context)
        finally:
            await store.aclose()
        print(_answered_line(record.request_id, value, record.answer))
        return 0

    return anyio.run(main)


_AGENT_FORMS = (
    "--agent path/to/script.py:NAME (the script that started the run) or --agent "
    "package.module:NAME, where NAME is the global holding the root Agent or a function "
    "returning it"
)


def _served_forms(command: str) -> str:
    return (
        f"{command} MODULE:ATTR, e.g. package.module:NAME or path/to/script.py:NAME, where "
        "NAME is the global holding the Agent or a function returning it (importable from "
        "the current directory)"
    )


def _could_be_agent(value: object) -> bool:
    """An Agent, or a function (that may return one)."""
    from ..agent import Agent

    return isinstance(value, Agent) or inspect.isfunction(value)


def _load_agent(spec: str, recorded: bool = False, *, command: str | None = None) -> Agent:
    """The agent at ``spec``: ``--agent`` (``resume``; ``recorded``: the run's own), or the
    MODULE:ATTR a server ``command`` serves (``serve``, ``serve --a2a``, ``mcp``)."""
    from .._values.refs import MissingAttributeError, load_ref
    from ..agent import Agent

    if command is not None:
        given, forms = f"{command}: MODULE:ATTR {spec!r}", _served_forms(command)
        where = f"{command}: cannot load MODULE:ATTR {spec!r}"
    else:
        given, forms = f"--agent {spec!r}", _AGENT_FORMS
        where = f"cannot load the agent the run recorded, {spec}" if recorded else ""
        where = where or f"cannot load --agent {spec!r}"
    try:
        target = load_ref(spec, wanted=_could_be_agent)
        agent = target if isinstance(target, Agent) else target()
    except ValueError:
        raise _Fail(EXIT_AGENT, f"{given} is not of the form: pass {forms}") from None
    except MissingAttributeError as e:  # its message names the file, and what was meant
        raise _Fail(EXIT_AGENT, f"{where}: {e}") from None
    except Exception as e:  # the user's module: any error while importing or building it
        # Not found at all: say how it is named; its own failure: that failure alone.
        hint = f"; pass {forms}" if isinstance(e, ImportError) and (recorded or command) else ""
        raise _Fail(EXIT_AGENT, f"{where}: {error_text(e)}{hint}") from None
    if not isinstance(agent, Agent):
        raise _Fail(EXIT_AGENT, f"{given} gave {type(agent).__name__}, not an Agent")
    return agent


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
    agent = _load_agent(ref, recorded=given is None)
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

    from ..exceptions import RunLeasedError, UnknownRequestError

    answers = _parse_answers(args.answer)

    async def main() -> int:
        store = _open(args.store)
        policy = "interrupt" if args.interrupt else None
        try:
            agent = await _agent_of(store, args.run_id, args.agent)
            for request_id, text in answers.items():
                typed = _typed_answer(await store.get_request(request_id), text)
                answers[request_id] = typed

            async def resume(wait: bool) -> Any:
                return await agent.resume(
                    args.run_id,
                    store=store,
                    answers=answers,
                    on_unhandled=policy,
                    max_age=args.max_age,
                    handler=None if args.interrupt else _StoreNotice(args.store),
                    wait=wait,
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


def print_pending(pending: Sequence[RequestEvent]) -> None:
    """Print the requests a run stopped at, one line each on stdout (``resume --interrupt``,
    ``run --interrupt``): ``pending REQUEST_ID: question``."""
    from ..events import ClarificationRequest

    for request in pending:
        if isinstance(request, ClarificationRequest):
            what = request.question
        else:
            what = f"permission for {request.tool_name}"
        print(_show(f"pending {request.request_id}: {what}"))


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


def failure(error: BaseException) -> tuple[int, str]:
    """The exit status and one-line message of an error that ended a command."""
    from ..exceptions import (
        HpdAgentError,
        RequestError,
        RunLeasedError,
        StoreCorruptError,
        StoreUnavailableError,
    )

    if isinstance(error, (_Fail, MissingExtraError)):
        return error.status, str(error)
    if isinstance(error, RunLeasedError):
        return EXIT_LEASED, str(error)
    if isinstance(error, StoreUnavailableError):
        return EXIT_STORE_UNAVAILABLE, str(error)
    if isinstance(error, StoreCorruptError):
        return EXIT_STORE_CORRUPT, str(error)
    if isinstance(error, RequestError):
        return _REFUSALS.get(type(error).__name__, EXIT_FAILED), str(error)
    if isinstance(error, HpdAgentError):
        return EXIT_FAILED, f"{type(error).__name__}: {error}"
    return (
        EXIT_INTERNAL,
        f"internal error: {error_text(error)} (HPD_AGENT_DEBUG=1 shows the traceback)",
    )
