"""The hook ``hpd-agent inbox --hook inbox_hooks:webhook`` installs in the inbox tests: a
``Webhook`` to ``$HPD_TEST_WEBHOOK``, signed with ``SECRET``."""

from __future__ import annotations

import os

from hpd_agent.governance import Webhook

SECRET = "inbox-secret"


def webhook() -> Webhook:
    """The receiver the test listens with."""
    return Webhook(os.environ["HPD_TEST_WEBHOOK"], secret=SECRET)
