"""What the MCP client's tests share: the servers of ``mcp_client_servers.py`` reached over
stdio (the client starts the process) or streamable HTTP (a process on 127.0.0.1 started
here), in either protocol mode; their side-effect logs; this process's server children."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from hpd_agent.mcp import MCPTools

SERVERS = Path(__file__).with_name("mcp_client_servers.py")


@dataclass(frozen=True)
class Target:
    """One server to test against: which server, how it is reached, which protocol."""

    kind: str  # "low" | "fast"
    transport: str  # "stdio" | "http"
    mode: str  # "auto" (2026-07-28) | "legacy" (2025-11-25)
    log: Path
    url: str | None = None
    ephemeral: bool = False

    @property
    def modern(self) -> bool:
        return self.mode == "auto"

    def tools(self, prefix: str | None = None) -> MCPTools:
        if self.transport == "http":
            assert self.url is not None
            return MCPTools.http(self.url, prefix=prefix, mode=self.mode)  # type: ignore[arg-type]
        args = [str(SERVERS), self.kind, "stdio", str(self.log)]
        if self.ephemeral:
            args.append("--ephemeral")
        return MCPTools.stdio(sys.executable, args, prefix=prefix, mode=self.mode)  # type: ignore[arg-type]

    def effects(self) -> list[str]:
        """The server's side effects so far, in order."""
        return self.log.read_text().splitlines() if self.log.exists() else []

    @property
    def protocol(self) -> str:
        return "2026-07-28" if self.modern else "2025-11-25"


@contextmanager
def http_server(kind: str, log: Path, *, ephemeral: bool = False) -> Iterator[str]:
    """A server process listening on 127.0.0.1 (a free port); yields its endpoint URL."""
    args = [sys.executable, str(SERVERS), kind, "http", str(log)]
    if ephemeral:
        args.append("--ephemeral")
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # "PORT <n>" once it listens
        assert line.startswith("PORT "), line
        yield f"http://127.0.0.1:{int(line.split()[1])}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def target(
    kind: str, transport: str, mode: str, tmp: Path, *, ephemeral: bool = False
) -> Iterator[Target]:
    log = tmp / f"{kind}-{transport}-{mode}.log"
    if transport == "stdio":
        yield Target(kind, transport, mode, log, ephemeral=ephemeral)
        return
    with http_server(kind, log, ephemeral=ephemeral) as url:
        yield Target(kind, transport, mode, log, url=url, ephemeral=ephemeral)


def stdio_children(marker: bytes = b"") -> list[int]:
    """Pids of this process's children that are stdio servers of ``mcp_client_servers``
    (or, with ``marker``, whose command line holds it)."""
    me = os.getpid()
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # gone meanwhile
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        line = b" ".join(cmdline)
        ours = marker in line if marker else SERVERS.name.encode() in line and b"stdio" in cmdline
        if ppid == me and ours:
            found.append(int(entry.name))
    return found
