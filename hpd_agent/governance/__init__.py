"""Questions as a governed workflow: who answered, on which channel, who may answer, and
notifications of requests to the human.

- Every answer and decline has an author, ``Author(by, channel)``: kept with the answer in
  the store (``RequestRecord.answered_by`` / ``.channel`` / ``.answered_at``, never
  overwritten), on the resolved events and on the trace's ``await_human`` span. The shipped
  surfaces name theirs (``CHANNELS``): the console and ``hpd-agent answer`` the OS user
  (``os_user``), a server the name of the token a request carried (``"local"`` without
  tokens), MCP the client's name; code names it with ``run.respond(..., by=...)`` or
  ``hpd_agent.store.respond(..., by=..., channel=...)``.
- ``AnswerPolicy`` decides who may answer which request; ``PathPolicy`` is a ready one
  (agent-path globs per identity, and who may approve which tool). ``run.respond``,
  ``store.respond``, the servers (``--policy MODULE:ATTR``, ``load_policy``) and
  ``hpd-agent answer --policy`` ask it before anything is written; a refusal is an
  ``AnswerRefusedError`` saying why.
- ``Webhook`` notifies a receiver (signed JSON) when a request opens, is about to expire and
  ends (who answered, on which channel), from a delivery worker outside every run.

Never imported by ``import hpd_agent``: the core defines the seams (``hpd_agent.backend``,
``hpd_agent.hooks``), this package builds on them. See docs/governance.md.
"""

from ..backend import CHANNELS, AnswerPolicy, Author, Authored, Channel
from ..exceptions import AnswerRefusedError
from ._author import grant_author, os_user
from ._policy import PathPolicy, load_policy
from ._webhook import SIGNATURE_HEADER, Notification, Webhook, delivery_id

__all__ = [
    "CHANNELS",
    "SIGNATURE_HEADER",
    "AnswerPolicy",
    "AnswerRefusedError",
    "Author",
    "Authored",
    "Channel",
    "Notification",
    "PathPolicy",
    "Webhook",
    "delivery_id",
    "grant_author",
    "load_policy",
    "os_user",
]
