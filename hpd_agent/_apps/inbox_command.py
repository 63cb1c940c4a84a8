"""``hpd-agent inbox --store URL``: one inbox for a whole store (``hpd_agent.inbox``).

Serves the page and the JSON API over every pending request of the store, whichever process
or surface started its run, under uvicorn: loopback unless ``--token``, the Host and Origin
rules of ``serve`` (``--allow-host``, ``--allow-origin``). Its tokens and ``--policy`` are
``serve``'s: an answer is recorded as given by the token's name (``local`` without tokens),
on channel ``inbox``, and a policy refusing it is a 403. ``--hook MODULE:ATTR`` hooks are
told of every request the store opens and ends while the inbox runs (a ``Webhook`` there
notifies for the whole store). The store must exist (a typo opens no new, empty one).
"""

from __future__ import annotations

import argparse
from typing import Any

from .cli_parser import port_number
from .hook_option import add_hook_option, install_hooks
from .serving import add_policy_option, add_token_option

__all__ = ["DEFAULT_PORT", "add_inbox_command"]

DEFAULT_PORT = 8001
"""The inbox's port unless told (``serve``'s is 8000: both run side by side)."""


def add_inbox_command(sub: Any) -> None:
    """Register ``inbox`` on the subcommands ``sub``."""
    inbox = sub.add_parser(
        "inbox",
        help="serve one inbox for a whole store: every run's pending questions, a web page "
        "and a JSON API to answer them",
        description="Serve a web page and a JSON API (/inbox/requests, /inbox/events) over "
        "every pending question and permission in the store, whichever process or surface "
        "started the run; answers go through the store and wake the run wherever it waits.",
    )
    inbox.add_argument(
        "--store", required=True, help="the store: a SQLite path or a postgresql:// DSN"
    )
    inbox.add_argument("--host", default="127.0.0.1", help="interface (default 127.0.0.1)")
    inbox.add_argument(
        "--port",
        type=port_number,
        default=DEFAULT_PORT,
        help=f"port (default {DEFAULT_PORT}); 0 picks a free one",
    )
    add_token_option(inbox)
    add_policy_option(inbox)
    inbox.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name clients may use besides loopback ones and --host (repeatable)",
    )
    inbox.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a browser origin (https://app.example) allowed to call the API (repeatable)",
    )
    add_hook_option(inbox)
    inbox.set_defaults(func=_cmd_inbox)


def _cmd_inbox(args: argparse.Namespace) -> int:
    from .extras import needs_extra, needs_store_extra
    from .serving import serve_http, serving_policy, serving_tokens

    hooks = install_hooks(args.hook)  # told of the store's requests (see the module)
    with needs_extra("web", "inbox"):
        import uvicorn  # noqa: F401  # pyright: ignore[reportUnusedImport]

        from .. import inbox
    needs_store_extra(args.store)
    token = serving_tokens(args.token, args.host, command="inbox: ")
    policy = serving_policy(args.policy, command="inbox: ")
    host = args.host.strip("[]")
    # The Host rule of serve (docs/web.md): loopback names, the bound address and
    # --allow-host; with a token and no --allow-host, any name (the token guards it).
    hosts = [*args.allow_host, host] if args.allow_host or token is None else None
    app = inbox.create_app(
        args.store,
        token=token,
        allowed_hosts=hosts,
        allowed_origins=args.allow_origin,
        hooks=hooks,
        policy=policy,
    )
    return serve_http(app, args.host, args.port, what="the inbox", path="/")
