"""Lease holder ids, and whether the process behind one is gone.

A holder id is ``host:pid:random`` and, where the process can tell (Linux ``/proc``),
``:place:start``: ``place`` names this kernel boot and PID namespace (a hash of
``/proc/sys/kernel/random/boot_id`` and the inode of ``/proc/self/ns/pid``), ``start`` is
the process's start time in clock ticks since boot (``/proc/<pid>/stat``). The host name
alone proves nothing (containers share it, machines repeat it); a pid alone neither (pids
are reused). A holder recorded in the same boot and PID namespace as the caller names a
process the caller can look up: if that pid is absent, a zombie, or a process that started
at another time, the holder is gone and its lease may be taken over at once. Any other
holder (another machine, container or boot, an id without a place) is never judged gone:
its lease is waited out.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import os
import secrets
import socket
from collections.abc import Iterator

__all__ = ["holder_gone", "new_holder"]


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read()
    except OSError:
        return None


@functools.cache
def _place() -> str | None:
    """This kernel boot and PID namespace, as 12 hex digits; None where unknown."""
    boot = _read("/proc/sys/kernel/random/boot_id")
    try:
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None
    if not boot:
        return None
    return hashlib.sha256(f"{boot.strip()}/{namespace}".encode()).hexdigest()[:12]


def _started(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot); None if it is absent or a
    zombie (it has exited, only its parent has not reaped it yet)."""
    stat = _read(f"/proc/{pid}/stat")
    if stat is None:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()  # after "pid (comm) ": state is first
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return fields[19]  # field 22 of the whole line


_OWN_START: dict[int, str | None] = {}
"""``_started`` of this process, by pid, read once: a process's start time never changes,
and reading ``/proc`` costs tens of microseconds, once per run otherwise. A forked child
has another pid, so it reads its own."""


def _own_start() -> str | None:
    pid = os.getpid()
    try:
        return _OWN_START[pid]
    except KeyError:
        started = _OWN_START[pid] = _started(pid)
        return started


_OWN_IDS: dict[int, tuple[str, str, Iterator[int]]] = {}
"""By pid: the holder ids' ``host:pid:`` and ``:place:start`` (read once, as ``_OWN_START``),
and the count their middle part takes (from a random start)."""


def new_holder() -> str:
    """A new holder id (``host:pid:random``, and where known ``:place:start``): one per
    session that takes a run's lease (``Store.take_lease``'s ``holder``). ``random`` is
    counted up from a random start made once per process: every session of the process
    gets its own, and no random bytes are read per run."""
    pid = os.getpid()
    own = _OWN_IDS.get(pid)
    if own is None:
        place, started = _place(), _own_start()
        tail = "" if place is None or started is None else f":{place}:{started}"
        start = int.from_bytes(secrets.token_bytes(4), "big")
        own = _OWN_IDS[pid] = (f"{socket.gethostname()}:{pid}:", tail, itertools.count(start))
    head, tail, count = own
    return f"{head}{next(count) & 0xFFFFFFFF:08x}{tail}"


def holder_gone(holder: str) -> bool:
    """Whether ``holder`` names a process of this boot and PID namespace that no longer
    runs (module doc). False whenever that cannot be known.

    A store's ``take_lease`` takes a live lease over when its holder is gone (a crashed
    process on this machine), instead of refusing until it expires.
    """
    parts = holder.split(":")
    if len(parts) < 5 or parts[-2] != _place():
        return False
    try:
        pid = int(parts[-4])
    except ValueError:
        return False
    if pid == os.getpid():
        return False  # this process: alive
    return _started(pid) != parts[-1]
