"""How ``SQLiteStore`` talks to its file quickly: the durability levels, the event-loop
connection for short statements, the background checkpointer, and the wake-up sockets.

- **Durability.** ``"process"`` (the default): WAL with ``synchronous=NORMAL``; a commit is a
  write into the operating system's page cache, so it survives the crash (even SIGKILL) of
  any process using the store, but the last commits may be lost if the operating system
  itself crashes or the power fails (the file stays consistent). ``"os"``: WAL with
  ``synchronous=FULL``; every commit waits for ``fsync``, so it survives an OS crash or a
  power cut too, at about a millisecond (disk-dependent) per commit.
- **Short statements on the event loop** (``"process"`` only). A point read or write (one
  request, one journal entry, one run record, a lease) takes a few tens of microseconds and
  never waits for a disk, so it runs on the event-loop thread on a connection of its own
  that never waits for a lock (``busy_timeout`` 0): when another writer holds the file's
  write lock, the statement fails at once with nothing written and goes to the store's
  worker thread, which waits for the lock. Handing a statement to a thread costs more than
  the statement itself.
- **Checkpoints off the event loop.** The connections never checkpoint on commit (that
  copies the WAL into the database file and syncs it: milliseconds); a daemon thread with its
  own connection does a ``PASSIVE`` checkpoint every ``CHECKPOINT_EVERY`` statements. Under a
  steady stream of commits a ``PASSIVE`` checkpoint never reaches the WAL's last frame, so
  once the WAL holds ``RESTART_FRAMES`` frames the thread follows it with a ``RESTART``
  checkpoint (writers wait for the few frames left, the event loop's through the worker
  thread; one that would wait longer than ``_RESTART_WAIT`` for a writer or a reader gives
  up until the next nudge): the next commit starts the WAL again, and a WAL grown in a
  burst is cut back to ``WAL_SIZE_LIMIT``.
- **Wake-ups.** A process waiting for answers binds a Unix datagram socket in
  ``<store>.wake/``; a process that resolves a request sends its id to every socket there
  after the commit. A request feed (``RequestFeed``: an inbox) binds one named ``feed-...``
  there too, to which a process that adds a request also sends its id (``feed_sockets``,
  ``send_to``: the list of feeds' sockets kept a moment, so that a request opened while no
  feed listens costs no directory listing). A folder too deep for a socket's name
  (``sun_path`` holds about 100 bytes) is named through ``/proc/self/fd`` on Linux. Where
  Unix sockets are missing, or no socket can be bound, waiters fall back to polling
  (``SQLiteStore.poll_interval``).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import sqlite3
import threading
from collections.abc import Generator
from typing import Literal

__all__ = [
    "CHECKPOINT_EVERY",
    "FEED",
    "RESTART_FRAMES",
    "WAL_SIZE_LIMIT",
    "Checkpointer",
    "Durability",
    "WakeSocket",
    "check_durability",
    "feed_sockets",
    "is_busy",
    "notify_all",
    "send_to",
    "wake_dir",
]

Durability = Literal["process", "os"]

CHECKPOINT_EVERY = 500
"""Statements between two background checkpoints (each appends at most a few WAL pages)."""

RESTART_FRAMES = 16384
"""WAL frames (pages, 4 KiB each by default) past which a checkpoint also makes the next
writer start the WAL again from its beginning (``Checkpointer``)."""

WAL_SIZE_LIMIT = 128 * 1024 * 1024
"""Bytes a WAL file is cut back to when it starts again (``PRAGMA journal_size_limit``)."""

_RESTART_WAIT = 0.02
"""Seconds the checkpointer's RESTART may wait for a writer or a reader to finish."""

FEED = "feed-"
"""How the names of request feeds' sockets start: a new request is sent to them alone."""

_SUN_PATH_MAX = 100  # sockaddr_un.sun_path is 104-108 bytes depending on the platform
_O_PATH = getattr(os, "O_PATH", 0) if os.path.isdir("/proc/self/fd") else 0
"""Linux: a folder can be named through ``/proc/self/fd`` (0 where it cannot)."""


@contextlib.contextmanager
def _addressed(folder: str) -> Generator[str]:
    """``folder``, or where a socket's name in it would be too long for ``sun_path``, a
    short name of it (``/proc/self/fd/N``, Linux) while the block runs: a store deep in a
    folder tree keeps its wake-ups instead of falling back to polling."""
    if len(folder) + 40 <= _SUN_PATH_MAX or not _O_PATH:
        yield folder
        return
    try:
        fd = os.open(folder, _O_PATH | os.O_DIRECTORY)
    except OSError:
        yield folder
        return
    try:
        yield f"/proc/self/fd/{fd}"
    finally:
        os.close(fd)


def check_durability(durability: str) -> Durability:
    """``durability`` if it is a level the store knows.

    Raises:
        UserError: It is not ``"process"`` or ``"os"``.
    """
    from ..exceptions import UserError

    if durability not in ("process", "os"):
        raise UserError(
            f"durability must be 'process' (survives a crash of the process) or 'os' "
            f"(survives an OS crash or power cut too), not {durability!r}"
        )
    return durability  # type: ignore[return-value]


def is_busy(error: sqlite3.OperationalError) -> bool:
    """Whether ``error`` says another connection holds the lock (nothing was written)."""
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    text = str(error)
    return "locked" in text or "busy" in text


class Checkpointer:
    """A daemon thread that checkpoints the WAL when asked (``nudge``), on its own connection.

    Args:
        path: The store file.
    """

    def __init__(self, path: str) -> None:
        self._path = path
        self._wanted = threading.Event()
        self._stopping = False
        self._count = 0
        self._thread: threading.Thread | None = None

    def tick(self, writes: int = 1) -> None:
        """Count one statement (or a group commit's ``writes``); every ``CHECKPOINT_EVERY``
        of them, ask for a checkpoint."""
        self._count += writes
        if self._count >= CHECKPOINT_EVERY:
            self._count = 0
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="hpd-agent-sqlite-checkpoint", daemon=True
                )
                self._thread.start()
            self._wanted.set()

    def _loop(self) -> None:
        try:
            # A RESTART holds writers off while it waits for one and for readers: it waits
            # a moment at most, and is tried again at the next nudge.
            conn = sqlite3.connect(self._path, timeout=_RESTART_WAIT, isolation_level=None)
        except sqlite3.Error:
            return
        try:
            while True:
                self._wanted.wait()
                self._wanted.clear()
                if self._stopping:
                    return
                with contextlib.suppress(sqlite3.Error):
                    self._checkpoint(conn)
        finally:
            conn.close()

    @staticmethod
    def _checkpoint(conn: sqlite3.Connection) -> None:
        # PASSIVE: copies what no reader still needs, never blocks a writer; a busy file
        # is simply checkpointed next time.
        _, frames, _ = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        if frames >= RESTART_FRAMES:
            # Under a steady stream of commits a PASSIVE checkpoint never catches up with
            # the last frame, so no writer ever starts the WAL again and the file grows
            # without end (a GB for 10,000 runs). RESTART holds writers off for the few
            # frames left and until readers are off the WAL: the next commit starts it
            # again from its beginning. The loop's connection, which never waits, writes
            # through the store's thread meanwhile.
            conn.execute("PRAGMA wal_checkpoint(RESTART)")

    def stop(self) -> None:
        """End the thread (after a checkpoint it is doing, if any)."""
        self._stopping = True
        self._wanted.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)


def wake_dir(path: str) -> str | None:
    """The folder of a store's wake-up sockets, or None where there can be none."""
    if path == ":memory:" or path.startswith("file:") or not hasattr(socket, "AF_UNIX"):
        return None
    return os.path.abspath(path) + ".wake"


def notify_all(folder: str, request_id: str) -> None:
    """Send ``request_id`` to every waiting process's socket in ``folder``; never blocks.

    A socket whose process died refuses the datagram and is removed. A full socket buffer
    drops it: that process's waiter still finds the answer at its next full check.
    """
    try:
        names = os.listdir(folder)
    except OSError:
        return
    send_to(folder, names, request_id)


def feed_sockets(folder: str) -> list[str]:
    """The names of the request feeds' sockets in ``folder`` (``FEED``...)."""
    try:
        return [name for name in os.listdir(folder) if name.startswith(FEED)]
    except OSError:
        return []


def send_to(folder: str, names: list[str], request_id: str) -> list[str]:
    """Send ``request_id`` to the sockets ``names`` of ``folder``; never blocks. Returns
    the names still there (a socket whose process died refuses it and is removed)."""
    if not names:
        return names
    payload = request_id.encode()[:4000]
    kept: list[str] = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sender, _addressed(folder) as at:
        sender.setblocking(False)
        for name in names:
            try:
                sender.sendto(payload, os.path.join(at, name))
            except (ConnectionRefusedError, FileNotFoundError):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(folder, name))
                continue
            except OSError:
                pass  # a full buffer (EAGAIN) or a name that is not a socket
            kept.append(name)
    return kept


class WakeSocket:
    """This process's wake-up socket for one store: bound in ``wake_dir``, removed on close.

    Args:
        folder: ``wake_dir(path)``.
        prefix: Starts the socket's name: ``FEED`` for a request feed's (which hears of
            requests opened too), empty for waiters (answers only).
    """

    def __init__(self, folder: str, *, prefix: str = "") -> None:
        self.folder = folder
        self.name = f"{prefix}{os.getpid()}-{secrets.token_hex(4)}"
        self.path = os.path.join(folder, self.name)
        self.sock: socket.socket | None = None

    def open(self) -> bool:
        """Bind the socket; False where that is impossible (then the store polls)."""
        for _ in range(2):  # the folder may be removed by a closing store in between
            try:
                os.makedirs(self.folder, exist_ok=True)
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            except OSError:
                return False
            try:
                with _addressed(self.folder) as at:
                    target = os.path.join(at, self.name)
                    if len(target.encode()) > _SUN_PATH_MAX:
                        sock.close()
                        return False
                    sock.bind(target)
                sock.setblocking(False)
            except OSError:
                sock.close()
                continue
            self.sock = sock
            return True
        return False

    def drain(self) -> list[str]:
        """The request ids received so far (without waiting)."""
        found: list[str] = []
        sock = self.sock
        while sock is not None:
            try:
                data = sock.recv(4096)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                break
            found.append(data.decode(errors="replace"))
        return found

    def close(self) -> None:
        """Close and remove the socket, and the folder if no other socket is left in it."""
        if self.sock is not None:
            self.sock.close()
            self.sock = None
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            with contextlib.suppress(OSError):
                os.rmdir(self.folder)  # refused while another process's socket is there
