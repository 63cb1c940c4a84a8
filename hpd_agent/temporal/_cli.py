"""``hpd-agent pending|answer --temporal HOST:PORT --workflow-id ID``: the store commands for a
run that is a Temporal workflow.

Wired into ``hpd_agent.cli`` by ``add_temporal_options``, which imports nothing of Temporal:
``temporalio`` is imported only when a ``--temporal`` command runs, so the CLI works without
the extra. Output and exit statuses are those of the store versions (the CLI passes its
``failure`` mapping in, so the table in ``hpd_agent.cli`` stays the one source): a refused
answer 3-7, Temporal unreachable 8 (like a store), no such workflow 11 (like no such run).

A ``temporalio`` client still alive when the interpreter shuts down can abort the process, so
a Temporal command flushes its output and leaves with ``os._exit``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from ..events import format_path
from ..exceptions import StoreUnavailableError
from ..questions import Decline
from ..text import printable

__all__ = ["add_temporal_options"]

_Command = Callable[[argparse.Namespace], int]
Failure = Callable[[BaseException], tuple[int, str]]
"""The CLI's mapping of an error to its exit status and one-line message."""

_EXIT_USAGE = 2
_EXIT_NO_RUN = 11


def add_temporal_options(sub: Any, failure: Failure) -> None:
    """Add ``--temporal``/``--workflow-id``/``--namespace`` to ``pending`` and ``answer``."""
    for name, command in (("pending", _pending), ("answer", _answer)):
        parser: argparse.ArgumentParser = sub.choices[name]
        parser.add_argument(
            "--temporal",
            metavar="HOST:PORT",
            help="a Temporal frontend: the run is the workflow --workflow-id (instead of --db)",
        )
        parser.add_argument("--workflow-id", help="the run's workflow id (with --temporal)")
        parser.add_argument(
            "--namespace", default="default", help="Temporal namespace (default: default)"
        )
        for action in parser._actions:  # pyright: ignore[reportPrivateUsage]
            if action.dest == "db":
                action.required = False  # --db or --temporal, checked below
        parser.set_defaults(func=_either(parser.get_default("func"), command, failure))


def _either(store_command: _Command, temporal_command: Any, failure: Failure) -> _Command:
    def run(args: argparse.Namespace) -> int:
        if args.temporal is None:
            if args.db is None:
                return _usage("give the store with --db, or a Temporal run with --temporal")
            if args.workflow_id is not None:
                return _usage("--workflow-id goes with --temporal")
            return store_command(args)
        if args.db is not None:
            return _usage("--db and --temporal are alternatives: give one")
        if not args.workflow_id:
            return _usage("--temporal needs --workflow-id (the run's workflow)")
        if getattr(args, "run", None):
            return _usage("--run is for --db; with --temporal the run is --workflow-id")
        if getattr(args, "sender", None):
            return _usage("--sender is kept by a store; a Temporal answer has no sender")
        return temporal_command(args, failure)

    return run


def _usage(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return _EXIT_USAGE


def _show(text: str) -> str:
    return printable(text, one_line=True)


def _pending(args: argparse.Namespace, failure: Failure) -> int:
    async def main(client: Any) -> int:
        from . import pending

        handle = client.get_workflow_handle(args.workflow_id)
        records = await pending(handle)
        for r in records:
            if args.json:
                item = {
                    "request_id": r.request_id,
                    "id": r.request_id,  # deprecated spelling of request_id, for one release
                    "run_id": r.run_id,
                    "agent_path": list(r.agent_path),
                    "kind": r.kind,
                    "question": r.question,
                    "options": None if r.options is None else list(r.options),
                    "created_at": r.created_at,
                    "expires_at": r.expires_at,
                }
                print(json.dumps(item))  # ASCII JSON: controls are escaped
                continue
            options = f"  [{' | '.join(r.options)}]" if r.options else ""
            agent = format_path(r.agent_path)
            print(_show(f"{r.request_id}  {r.run_id}  {agent}  {r.kind}: {r.question}{options}"))
        if not records and not args.json:
            print("no pending requests", file=sys.stderr)
        return 0

    return _session(args, failure, main)


def _answerer(args: argparse.Namespace) -> tuple[str | None, Any]:
    """Who answers (``--as``, else the OS user) and the ``--policy`` (``UserError``)."""
    from ..exceptions import UserError
    from ..governance import load_policy, os_user

    if args.as_name is not None and not args.as_name.strip():
        raise UserError("--as needs a name")
    policy = None if args.policy is None else load_policy(args.policy)
    return (args.as_name if args.as_name is not None else os_user()), policy


async def _check(handle: Any, request_id: str, by: str | None, policy: Any) -> None:
    """``AnswerRefusedError`` unless ``policy`` lets ``by`` answer the pending request (one
    that is not pending is left to the update, which refuses it with its reason)."""
    from ..backend import check_policy
    from ..store import RequestRecord
    from . import pending

    for info in await pending(handle):
        if info.request_id == request_id:
            check_policy(policy, by, RequestRecord.from_event(info.event))


def _answer(args: argparse.Namespace, failure: Failure) -> int:
    from ..exceptions import UserError

    try:
        by, policy = _answerer(args)
    except UserError as e:
        return _usage(str(e))
    if args.decline:
        if args.text is not None or args.json:
            return _usage("--decline takes no answer: give TEXT or --decline, not both")
        value: Any = Decline()
    elif args.text is None:
        return _usage("give the answer TEXT, or --decline to decline the request")
    elif args.json:
        try:
            value = json.loads(args.text)
        except RecursionError:
            return _usage("--json answer is nested too deeply")
        except ValueError as e:
            return _usage(f"--json answer is not valid JSON: {e}")
    else:
        value = args.text

    async def main(client: Any) -> int:
        from . import respond

        handle = client.get_workflow_handle(args.workflow_id)
        if policy is not None:
            await _check(handle, args.request_id, by, policy)
        typed = value
        if isinstance(value, str) and not args.json:
            try:
                typed = await _typed(handle, args.request_id, value)
            except ValueError as e:
                return _usage(_show(f"request {args.request_id}: {e}"))
        answer = await respond(handle, args.request_id, typed, by=by)
        if isinstance(value, Decline):
            print(_show(f"declined {args.request_id}"))
        else:
            print(_show(f"answered {args.request_id}: {json.dumps(answer)}"))
        return 0

    return _session(args, failure, main)


async def _typed(handle: Any, request_id: str, text: str) -> Any:
    """Typed text as the pending question ``request_id`` reads it (``parse_typed``: an
    option's 1-based number, any kind's own rules or answer schema); the text itself for a
    permission or a request that is not pending (the update refuses it, with its reason).

    Raises:
        ValueError: The text cannot be read as an answer; the message says what to type.
    """
    from ..events import ClarificationRequest
    from ..questions import parse_typed
    from . import pending

    for info in await pending(handle):
        if info.request_id == request_id and isinstance(info.event, ClarificationRequest):
            return parse_typed(info.event, text)
    return text


def _session(
    args: argparse.Namespace, failure: Failure, main: Callable[[Any], Awaitable[int]]
) -> int:
    """Connect, run ``main``, report a failure in one line, and leave with ``os._exit``."""
    try:
        import temporalio  # noqa: F401  # pyright: ignore[reportUnusedImport]
    except ImportError:
        return _usage(
            "--temporal needs the temporal extra: "
            'pip install -e ".[temporal]" in the hpd-agent checkout (it is not on PyPI yet)'
        )
    import asyncio

    async def connected() -> int:
        from temporalio.client import Client
        from temporalio.service import RPCError, RPCStatusCode

        try:
            client = await Client.connect(args.temporal, namespace=args.namespace)
        except Exception as e:
            raise StoreUnavailableError(f"cannot reach Temporal at {args.temporal}: {e}") from None
        try:
            return await main(client)
        except RPCError as e:
            if e.status == RPCStatusCode.NOT_FOUND:
                print(_show(f"error: no workflow {args.workflow_id!r}: {e}"), file=sys.stderr)
                return _EXIT_NO_RUN
            raise

    try:
        status = asyncio.run(connected())
    except Exception as e:  # one line and its status, never a traceback
        status, message = failure(e)
        print(f"error: {_show(message)}", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
