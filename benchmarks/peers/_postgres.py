"""A private PostgreSQL server for the durable benchmarks, on 127.0.0.1 and a free port.

``benchmarks/run.py --durable`` starts one server and hands its DSN to every bench process,
so hpd_agent's ``PostgresStore`` and LangGraph's ``AsyncPostgresSaver`` write to the same
server with the same settings; each process works in a database of its own
(``fresh_database``), dropped when it ends. A bench run by hand with ``--store postgres``
and no ``--dsn`` starts its own server the same way.

The server comes from Debian's ``postgresql`` binaries (installed with apt-get when missing
and running as root), initialised with ``initdb`` and run by ``pg_ctl`` as the ``postgres``
user (``initdb`` refuses root) in a temporary directory, with ``fsync=off`` as in the
test-suite: the figures are the frameworks' costs, not the disk's.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator


class ServerUnavailable(Exception):
    """No PostgreSQL server binaries here, and no way to install them (the message says why)."""


def _bindir() -> str | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return os.path.dirname(found[-1])
    initdb = shutil.which("initdb")
    return os.path.dirname(initdb) if initdb else None


def _install() -> str:
    """Install Debian's server package; returns why it failed (empty when it worked)."""
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return "no PostgreSQL binaries, and no apt-get as root to install them"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "postgresql"]):
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            return f"{' '.join(cmd)} failed: {done.stderr.strip()[-500:]}"
    return ""


def _as_postgres(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def server(max_connections: int = 300) -> Iterator[str]:
    """Start a private cluster; yields its DSN (database ``postgres``) and stops it on exit.

    Raises:
        ServerUnavailable: The binaries are missing and cannot be installed.
        RuntimeError: ``initdb`` or ``pg_ctl`` failed (their output is in the message).
    """
    bindir = _bindir()
    if bindir is None:
        why = _install()
        bindir = _bindir()
        if bindir is None:
            raise ServerUnavailable(f"PostgreSQL server cannot be had here: {why}")
    root = tempfile.mkdtemp(prefix="hpd-bench-pg-")
    os.chmod(root, 0o755)
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    data = os.path.join(root, "data")
    port = _free_port()
    options = (
        f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off "
        f"-c max_connections={max_connections}"
    )
    steps = [
        [f"{bindir}/initdb", "-D", data, "-A", "trust", "-U", "postgres", "--no-sync"],
        [f"{bindir}/pg_ctl", "-D", data, "-o", options, "-l", f"{root}/log", "-w", "start"],
    ]
    try:
        for step in steps:
            subprocess.run(_as_postgres(step), check=True, capture_output=True, timeout=300)
    except subprocess.CalledProcessError as e:
        shutil.rmtree(root, ignore_errors=True)
        raise RuntimeError(f"could not start PostgreSQL: {e.stderr!r}") from e
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        stop = [f"{bindir}/pg_ctl", "-D", data, "-m", "immediate", "stop"]
        subprocess.run(_as_postgres(stop), capture_output=True, timeout=60)
        shutil.rmtree(root, ignore_errors=True)


def _with_database(dsn: str, name: str) -> str:
    base, _, _ = dsn.rpartition("/")
    return f"{base}/{name}"


@contextlib.contextmanager
def fresh_database(dsn: str) -> Iterator[str]:
    """A new, empty database on ``dsn``'s server for one process; dropped on exit."""
    import psycopg

    name = f"bench_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')  # type: ignore[arg-type]
    try:
        yield _with_database(dsn, name)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')  # type: ignore[arg-type]


@contextlib.contextmanager
def database(dsn: str | None) -> Iterator[str]:
    """A fresh database on ``dsn``'s server, or on a private server started for the call."""
    with contextlib.ExitStack() as stack:
        if dsn is None:
            dsn = stack.enter_context(server())
        yield stack.enter_context(fresh_database(dsn))
