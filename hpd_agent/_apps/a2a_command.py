"""``hpd-agent serve --a2a MODULE:ATTR``: serve an agent over A2A (``hpd_agent.a2a.create_app``).

Needs only the ``a2a`` extra (a2a-sdk's HTTP server and uvicorn). On 127.0.0.1 by default;
another interface only with ``--token`` (or ``HPD_AGENT_TOKEN``), which JSON-RPC calls must
then carry as ``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import argparse
import socket
import sys

__all__ = ["INSTALL_A2A", "serve_a2a"]

INSTALL_A2A = 'pip install -e ".[a2a]" in the hpd-agent checkout (it is not on PyPI yet)'


def serve_a2a(args: argparse.Namespace) -> int:
    """Run ``serve --a2a``; the exit status."""
    from .cli_store import EXIT_USAGE, _Fail, served_agent, serving_token

    try:
        import uvicorn

        from ..a2a import create_app
    except ImportError as e:
        print(f"error: serve --a2a needs the a2a extra ({e}): {INSTALL_A2A}", file=sys.stderr)
        return 2
    if args.allow_host or args.allow_origin:
        raise _Fail(EXIT_USAGE, "serve --a2a: --allow-host and --allow-origin are for the web app")
    token = serving_token(args.token, args.host)
    agent = served_agent(args.agent)
    if args.store is not None:
        _probe_store(args.store)
    app = create_app(agent, store=args.store, url=args.url, token=token)
    sock = bound(args.host, args.port)
    if sock is None:
        return 2
    host = args.host.strip("[]")
    shown = f"[{host}]" if sock.family == socket.AF_INET6 else host
    print(f"Serving {agent.name} over A2A on http://{shown}:{sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=2)
    uvicorn.Server(config).run(sockets=[sock])
    return 0


def bound(host: str, port: int) -> socket.socket | None:
    """A socket listening on ``host:port`` (None, said on stderr, when it cannot)."""
    bare = host.strip("[]")
    family = socket.AF_INET6 if ":" in bare else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((bare, port))
    except (OSError, OverflowError) as e:
        sock.close()
        print(f"error: cannot listen on {host}:{port}: {e}", file=sys.stderr)
        return None
    sock.listen(128)
    return sock


def _probe_store(location: str) -> None:
    """Open and close the store now: a bad one is one error line, before serving."""
    import anyio

    from ..store import open_store

    anyio.run(open_store(location).aclose)
