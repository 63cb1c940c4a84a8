"""``hpd-agent pending|answer --temporal HOST:PORT --workflow-id ID``: the store commands for a
run that is a Temporal workflow.

Wired into ``hpd_agent.cli`` by ``add_temporal_options``, which imports nothing of Temporal:
``temporalio`` is imported only when a ``--temporal`` command runs, so the CLI works without
the extra. Output and exit statuses are those of the store versions.

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

__all__ = ["add_temporal_options"]

_Command = Callable[[argparse.Namespace], int]


def add_temporal_options(sub: Any) -> None:
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
        parser.set_defaults(func=_either(parser.get_default("func"), command))


def _either(store_command: _Command, temporal_command: _Command) -> _Command:
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
        return temporal_command(args)

    return run


def _usage(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def _pending(args: argparse.Namespace) -> int:
    async def main(client: Any) -> int:
        from . import pending

        handle = client.get_workflow_handle(args.workflow_id)
        records = await pending(handle)
        for r in records:
            if args.json:
                print(
                    json.dumps(
                        {
                            "id": r.request_id,
                            "run_id": r.run_id,
                            "agent_path": list(r.agent_path),
                            "kind": r.kind,
                            "question": r.question,
                            "options": None if r.options is None else list(r.options),
                            "created_at": r.created_at,
                            "expires_at": r.expires_at,
                        }
                    )
                )
            else:
                options = f"  [{' | '.join(r.options)}]" if r.options else ""
                agent = "/".join(r.agent_path)
                print(f"{r.request_id}  {r.run_id}  {agent}  {r.kind}: {r.question}{options}")
        if not records and not args.json:
            print("no pending requests", file=sys.stderr)
        return 0

    return _session(args, main)


def _answer(args: argparse.Namespace) -> int:
    from ..cli import _REFUSALS  # pyright: ignore[reportPrivateUsage]

    if args.json:
        try:
            value: Any = json.loads(args.text)
        except json.JSONDecodeError as e:
            return _usage(f"--json answer is not valid JSON: {e}")
    else:
        value = args.text

    async def main(client: Any) -> int:
        from ..exceptions import RequestError
        from . import respond

        handle = client.get_workflow_handle(args.workflow_id)
        try:
            answer = await respond(handle, args.request_id, value)
        except RequestError as e:
            print(f"error: {e}", file=sys.stderr)
            return _REFUSALS.get(type(e).__name__, 1)
        print(f"answered {args.request_id}: {json.dumps(answer)}")
        return 0

    return _session(args, main)


def _session(args: argparse.Namespace, main: Callable[[Any], Awaitable[int]]) -> int:
    """Connect, run ``main``, report failures in one line, and leave with ``os._exit``."""
    import asyncio

    async def connected() -> int:
        from temporalio.client import Client

        try:
            client = await Client.connect(args.temporal, namespace=args.namespace)
        except Exception as e:
            print(f"error: cannot reach Temporal at {args.temporal}: {e}", file=sys.stderr)
            return 1
        try:
            return await main(client)
        except Exception as e:  # the workflow is unknown, or does not run hpd_agent
            print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
            return 1

    try:
        import temporalio  # noqa: F401  # pyright: ignore[reportUnusedImport]
    except ImportError:
        return _usage('--temporal needs the temporal extra: pip install "hpd-agent[temporal]"')
    status = asyncio.run(connected())
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
