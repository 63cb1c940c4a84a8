"""The ``hpd-agent`` command: one subcommand per function below, registered in ``_parser``."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hpd-agent", description="Nested multi-agent orchestration with a human in the loop."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    version = sub.add_parser("version", help="print the version")
    version.set_defaults(func=_cmd_version)
    _add_store_commands(sub)
    return parser


def _cmd_version(args: argparse.Namespace) -> int:
    from . import __version__

    print(__version__)
    return 0


# -- durable runs: pending, answer, resume ---------------------------------------------------

_DEMO_AGENTS = "hpd_agent._demo:demo_agents"

# Exit statuses of `answer`, one per refusal, so scripts can tell them apart.
_REFUSALS = {
    "UnknownRequestError": 3,
    "RequestAlreadyAnsweredError": 4,
    "RequestExpiredError": 5,
    "RequestCancelledError": 6,
    "InvalidAnswerError": 7,
}


def _add_store_commands(sub: Any) -> None:
    db_help = "the store: a SQLite file, or a postgresql:// DSN"
    pending = sub.add_parser("pending", help="list requests waiting for an answer in a store")
    pending.add_argument("--db", required=True, help=db_help)
    pending.add_argument("--run", help="only this run's requests")
    pending.add_argument("--json", action="store_true", help="one JSON object per line")
    pending.set_defaults(func=_cmd_pending)

    answer = sub.add_parser("answer", help="answer a pending request in a store")
    answer.add_argument("request_id")
    answer.add_argument("text", help="the answer (with --json: a JSON value, e.g. true)")
    answer.add_argument("--db", required=True, help=db_help)
    answer.add_argument("--json", action="store_true", help="parse the answer as JSON")
    answer.add_argument("--sender", help="who answers (kept with the answer)")
    answer.set_defaults(func=_cmd_answer)

    resume = sub.add_parser("resume", help="continue a run journaled in a store")
    resume.add_argument("run_id")
    resume.add_argument("--db", required=True, help=db_help)
    resume.add_argument(
        "--agent",
        default=_DEMO_AGENTS,
        help="module:attribute of the root Agent, or of a callable returning it "
        f"(default: {_DEMO_AGENTS})",
    )
    resume.add_argument(
        "--answer",
        action="append",
        default=[],
        metavar="REQUEST_ID=TEXT",
        help="answer a pending request before resuming (repeatable)",
    )
    resume.add_argument(
        "--interrupt",
        action="store_true",
        help="stop with status 'interrupted' at the next unanswered question instead of waiting",
    )
    resume.add_argument(
        "--max-age", type=float, help="expire this run's pending requests older than SECONDS"
    )
    resume.set_defaults(func=_cmd_resume)


def _open(db: str) -> Any:
    from .store import open_store

    return open_store(db)


def _cmd_pending(args: argparse.Namespace) -> int:
    import anyio

    async def main() -> int:
        store = _open(args.db)
        try:
            records = await store.list_requests(run_id=args.run)
        finally:
            await store.aclose()
        for r in records:
            if args.json:
                print(
                    json.dumps(
                        {
                            "id": r.id,
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
                print(f"{r.id}  {r.run_id}  {agent}  {r.kind}: {r.question}{options}")
        if not records and not args.json:
            print("no pending requests", file=sys.stderr)
        return 0

    return anyio.run(main)


def _cmd_answer(args: argparse.Namespace) -> int:
    import anyio

    from .exceptions import RequestError
    from .store import respond

    if args.json:
        try:
            value: Any = json.loads(args.text)
        except json.JSONDecodeError as e:
            print(f"error: --json answer is not valid JSON: {e}", file=sys.stderr)
            return 2
    else:
        value = args.text
    context = {"channel": "cli"}
    if args.sender:
        context["sender"] = args.sender

    async def main() -> int:
        store = _open(args.db)
        try:
            record = await respond(store, args.request_id, value, context=context)
        except RequestError as e:
            print(f"error: {e}", file=sys.stderr)
            return _REFUSALS.get(type(e).__name__, 1)
        finally:
            await store.aclose()
        print(f"answered {record.id}: {json.dumps(record.answer)}")
        return 0

    return anyio.run(main)


def _load_agent(spec: str) -> Any:
    from .agent import Agent
    from .exceptions import UserError

    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise UserError(f"--agent must look like module:attribute, got {spec!r}")
    try:
        target = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as e:
        raise UserError(f"cannot load --agent {spec!r}: {e}") from e
    agent = target if isinstance(target, Agent) else target()
    if not isinstance(agent, Agent):
        raise UserError(f"--agent {spec!r} gave {type(agent).__name__}, not an Agent")
    return agent


def _cmd_resume(args: argparse.Namespace) -> int:
    import anyio

    from .events import ClarificationRequest
    from .exceptions import HpdAgentError

    answers: dict[str, str] = {}
    for item in args.answer:
        request_id, sep, text = item.partition("=")
        if not sep:
            print(f"error: --answer must be REQUEST_ID=TEXT, got {item!r}", file=sys.stderr)
            return 2
        answers[request_id] = text

    async def main() -> int:
        agent = _load_agent(args.agent)
        store = _open(args.db)
        policy = "interrupt" if args.interrupt else None
        try:
            result = await agent.resume(
                args.run_id,
                store=store,
                answers=answers,
                on_unhandled=policy,
                max_age=args.max_age,
                handler=None if args.interrupt else _StoreNotice(args.db),
            )
        finally:
            await store.aclose()
        if result.status == "interrupted":
            for request in result.pending:
                if isinstance(request, ClarificationRequest):
                    what = request.question
                else:
                    what = f"permission for {request.tool_name}"
                print(f"pending {request.request_id}: {what}")
            return 3
        print(result.output or "")
        return 0

    try:
        return anyio.run(main)
    except HpdAgentError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


class _StoreNotice:
    """Tells on stderr which questions wait; the answers come through the store."""

    def __init__(self, db: str) -> None:
        self.db = db

    async def on_event(self, event: Any) -> None:
        from .events import ClarificationRequest

        if isinstance(event, ClarificationRequest) and not event.replayed:
            agent = "/".join(event.agent_path)
            print(
                f"waiting for {event.request_id} ({agent}): {event.question}\n"
                f"  answer with: hpd-agent answer {event.request_id} TEXT --db {self.db}",
                file=sys.stderr,
                flush=True,
            )

    async def on_request(self, request: Any) -> Any:
        import anyio

        # Never answers here: the answer arrives through the store and resolves the request,
        # which cancels this wait.
        await anyio.sleep_forever()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``hpd-agent`` command; returns the exit status."""
    args = _parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
