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
from ..questions import Decline, answer_prompt
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
            help="a Temporal frontend: the run is the workflow --workflow-id (instead of --store)",
        )
        parser.add_argument("--workflow-id", help="the run's workflow id (with --temporal)")
        parser.add_argument(
            "--namespace", default="default", help="Temporal namespace (default: default)"
        )
        for action in parser._actions:  # pyright: ignore[reportPrivateUsage]
            if action.dest == "store":
                action.required = False  # --store or --temporal, checked below
        parser.set_defaults(func=_either(parser.get_default("func"), command, failure))


def _either(store_command: _Command, temporal_command: Any, failure: Failure) -> _Command:
    def run(args: argparse.Namespace) -> int:
        if args.temporal is None:
            if args.store is None:
                return _usage("give the store with --store, or a Temporal run with --temporal")
            if args.workflow_id is not None:
                return _usage("--workflow-id goes with --temporal")
            return store_command(args)
        if args.store is not None:
            return _usage("--store and --temporal are alternatives: give one")
        if not args.workflow_id:
            return _usage("--temporal needs --workflow-id (the run's workflow)")
        if getattr(args, "run", None):
            return _usage("--run is for --store; with --temporal the run is --workflow-id")
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
            # As `pending --store` lists a request: options numbered as typed, then the
            # line saying what it wants and what to type.
            listed = "".join(f"  {n}. {o}" for n, o in enumerate(r.options or (), 1))
            agent = format_path(r.agent_path)
            print(_show(f"{r.request_id}  {r.run_id}  {agent}  {r.question}{listed}"))
            print(_show(f"    {answer_prompt(r.event)}"))
        if not records and not args.json:
            print("no pending requests", file=sys.stderr)
        return 0

    return _session(args, failure, main)


def _answer(args: argparse.Namespace, failure: Failure) -> int:
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
        typed = value
        if isinstance(value, str) and not args.json:
            try:
                typed = await _typed(handle, args.request_id, value)
            except ValueError as e:
                return _usage(_show(f"request {args.request_id}: {e}"))
        answer = await respond(handle, args.request_id, typed)
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
