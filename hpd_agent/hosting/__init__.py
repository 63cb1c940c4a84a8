"""What every protocol adapter (web, MCP, A2A, the next one) stands on: the runs a server
hosts, what their clients read of them, and the rules of who may reach it.

- ``RunHost`` / ``HostedRun``: runs a server hosts in its task group, found again by id
  (maybe on another connection, maybe after a restart), resumed from the store when this
  process does not hold them; a run may be the next turn of a conversation (its history:
  ``Histories``, kept in memory, ``MemoryHistories``, or in a store's thread tables,
  ``ThreadHistories``; one turn at a time: ``ConversationBusyError``).
  ``HostedRun.events()`` reads the run's events from its first, for any number of readers;
  ``answer_request`` / ``cancel_request`` end its requests (``why_refused`` says why an
  answer was refused); ``cancel(reason)`` ends it; ``wait_settled()`` waits until it waits
  for answers or has ended; ``outcome`` says how it ended.
  A run another process drives (``HostedRun.elsewhere``) is answered through the store
  (``StoreRelay``, the same verbs), followed there until it moves on
  (``RunHost.moved_on``) and cancelled through it (``RunHost.cancel``).
- ``drive`` / ``EventSink``: the one way a run is driven for a server (its events handed to
  a sink in order, then its ``Outcome``); ``RunHost`` and the web server use it.
  ``Activity``: a server's log for whoever runs it, one line per run started or ended and
  per request asked or answered (who, which channel); ``Activity.watch`` wraps the sink.
- ``Outcome`` / ``outcome_of``: how a run ended as a client may read it (a result, or a
  stored record); ``public_error``: what a client may read of a run's failure (no run id,
  no lease holder).
- ``PERMISSION_OPTIONS`` / ``DECISIONS`` / ``decision_of``: a permission's three answers
  and the decision each stands for; ``Form`` / ``form_for`` / ``is_flat``: a pending
  request as a form (MCP's elicitation schema, which ACP shares) and its content back as
  an answer; ``choices_of``: a question's answers as buttons, when they are a few.
- ``Guard``: who may reach a server, in front of every route of every server we ship (web,
  A2A, MCP over HTTP): the Host and Origin rules, the bearer token (its name put in the
  request's scope under ``IDENTITY``, read back by ``identity_of``), JSON bodies of bounded
  size; ``nests_deeper``, how each server counts a JSON body's depth against its own limit.
- ``is_loopback``: where a server may run without a token.
- ``RPCError`` and JSON-RPC 2.0's error codes; ``parse_message`` / ``valid_id`` /
  ``error_of`` / ``as_object``: what the other side of a JSON-RPC connection sent, read
  without trusting it (ACP's wire; the A2A server's body check).
- ``protocol_stdio``: this process's stdin and stdout as byte streams for a protocol over
  stdio (ACP; any stdio server), stdout kept for the protocol's messages alone;
  ``open_child`` / ``ChildProcess``: the other way round, a program talked to over its
  stdio, in a process group of its own, ended in steps and reaped.

docs/architecture.md ("The adapter bridge") shows how an adapter is built on these.
"""

from ..exceptions import ConversationBusyError, UnknownRunError
from ._activity import Activity
from ._child import ChildProcess, open_child
from ._decisions import DECISIONS, PERMISSION_OPTIONS, PermissionOption, decision_of
from ._drive import STOPPED, EventSink, drive
from ._errors import public_error
from ._forms import Form, choices_of, form_for, is_flat
from ._guard import (
    DEFAULT_MAX_BODY,
    IDENTITY,
    LOCAL,
    TOKEN,
    Guard,
    client_name,
    identity_of,
    is_loopback,
    nests_deeper,
)
from ._histories import Histories, MemoryHistories, ThreadHistories
from ._hosted import HostedRun, why_refused
from ._jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    RPCError,
    as_object,
    error_of,
    parse_message,
    valid_id,
)
from ._outcome import Outcome, outcome_of
from ._relay import StoreRelay
from ._runs import RunHost
from ._stdio import protocol_stdio

__all__ = [
    "DECISIONS",
    "DEFAULT_MAX_BODY",
    "IDENTITY",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "LOCAL",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "PERMISSION_OPTIONS",
    "STOPPED",
    "TOKEN",
    "Activity",
    "ChildProcess",
    "ConversationBusyError",
    "EventSink",
    "Form",
    "Guard",
    "Histories",
    "HostedRun",
    "MemoryHistories",
    "Outcome",
    "PermissionOption",
    "RPCError",
    "RunHost",
    "StoreRelay",
    "ThreadHistories",
    "UnknownRunError",
    "as_object",
    "choices_of",
    "client_name",
    "decision_of",
    "drive",
    "error_of",
    "form_for",
    "identity_of",
    "is_flat",
    "is_loopback",
    "nests_deeper",
    "open_child",
    "outcome_of",
    "parse_message",
    "protocol_stdio",
    "public_error",
    "valid_id",
    "why_refused",
]
