"""The hook ``serve --hook tests.web.web_hook:webhook`` installs: a ``Webhook`` to the URL
the test puts in ``HPD_TEST_WEBHOOK_URL``, signed with ``s3cret``; ``not_a_hook`` is not one."""

from __future__ import annotations

import os

from hpd_agent.governance import Webhook

webhook = Webhook(os.environ.get("HPD_TEST_WEBHOOK_URL", "http://127.0.0.1:9/"), secret="s3cret")
not_a_hook = "just text"
