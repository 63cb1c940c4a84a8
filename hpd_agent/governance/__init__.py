"""Questions as a governed workflow: notifications of requests to the human.

``Webhook`` notifies a receiver (signed JSON) when a request opens, is about to expire and
ends, from a delivery worker outside every run. Never imported by ``import hpd_agent``.
See docs/governance.md.
"""

from ._webhook import SIGNATURE_HEADER, Notification, Webhook, delivery_id

__all__ = ["SIGNATURE_HEADER", "Notification", "Webhook", "delivery_id"]
