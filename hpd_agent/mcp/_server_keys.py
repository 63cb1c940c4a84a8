"""The key sealing a served run's ``requestState`` (MCP 2026-07-28), kept with the store.

The SDK seals every ``requestState`` it sends (AES-GCM) and opens every one a client sends
back, so a client can neither read nor forge one. With the SDK's default key, made anew by
each process, a restarted server could not open the state its predecessor sent: the client
holding an answer to a question of a stored run could not give it. So a server with a store
keeps its key there (as a journal entry of a run id no run takes), and every server of that
store, restarted or beside it, seals and opens with the same key. Without a store the key
lives in the process, as the runs do.
"""

from __future__ import annotations

import os

from mcp.server.request_state import AESGCMRequestStateCodec, InvalidRequestState

from ..store import JournalEntry, Store

__all__ = ["KEY_RUN", "StateCodec", "kept_key"]

KEY_RUN = "hpd_agent.mcp.state"
"""The journal's run id the key is kept under (not a run: no record, never listed)."""
_ENTRY = "request_state_key"


async def kept_key(store: Store) -> bytes:
    """The store's key, made and written on first use.

    Two servers starting at once on a new store may both write one; the later write wins
    and both read it back, so a state sealed in that moment by the loser is refused (once).
    """
    for attempt in range(2):
        entry = (await store.journal(KEY_RUN)).get(_ENTRY)
        if entry is not None and isinstance(entry.value, str):
            try:
                key = bytes.fromhex(entry.value)
            except ValueError:
                key = b""
            if len(key) == 32:
                return key
        if attempt == 0:
            fresh = JournalEntry(key=_ENTRY, kind="step", value=os.urandom(32).hex())
            await store.journal_put(KEY_RUN, fresh)
    raise RuntimeError(f"the request-state key kept in {store!r} cannot be read back")


class StateCodec:
    """The ``RequestStateCodec`` a served agent's states are sealed with: AES-256-GCM under
    a key given once the server starts (``use``), a fresh one until then."""

    def __init__(self) -> None:
        self._codec = AESGCMRequestStateCodec([os.urandom(32)])
        self.kept = False
        """Whether the key is one a store keeps (else this process's own)."""

    def use(self, key: bytes) -> None:
        """Seal and open with ``key`` from now on."""
        self._codec = AESGCMRequestStateCodec([key])
        self.kept = True

    def seal(self, payload: bytes) -> str:
        """An opaque token protecting ``payload``."""
        return self._codec.seal(payload)

    def unseal(self, token: str) -> bytes:
        """The payload of a token this key sealed; ``InvalidRequestState`` otherwise."""
        try:
            return self._codec.unseal(token)
        except InvalidRequestState:
            raise
        except Exception as e:  # the SDK turns any codec failure into its refusal too
            raise InvalidRequestState("malformed") from e
