"""``hpd-agent serve --a2a MODULE:ATTR``: serve an agent over A2A (``hpd_agent.a2a.create_app``).

Needs only the ``a2a`` extra (a2a-sdk's HTTP server and uvicorn). On 127.0.0.1 by default;
another interface only with ``--token`` (or ``HPD_AGENT_TOKEN``), which JSON-RPC calls must
then carry as ``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import argparse

__all__ = ["serve_a2a"]


def serve_a2a(args: argparse.Namespace) -> int:
    """Run ``serve --a2a``; the exit status."""
    from .cli_store import EXIT_USAGE, _Fail
    from .extras import needs_extra
    from .serving import activity_line, probe_store, serve_http, served_agent, serving_token

    with needs_extra("a2a", "serve --a2a"):
        import uvicorn  # noqa: F401  # pyright: ignore[reportUnusedImport]

        from ..a2a import create_app
    if args.allow_host or args.allow_origin:
        raise _Fail(EXIT_USAGE, "serve --a2a: --allow-host and --allow-origin are for the web app")
    token = serving_token(args.token, args.host)
    agent = served_agent(args.agent, "serve --a2a")
    if args.store is not None:
        probe_store(args.store)
    activity = None if args.quiet else activity_line
    app = create_app(agent, store=args.store, url=args.url, token=token, activity=activity)
    return serve_http(app, args.host, args.port, what=f"{agent.name} over A2A")
