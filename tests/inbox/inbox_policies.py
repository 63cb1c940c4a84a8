"""The policy ``hpd-agent inbox --policy inbox_policies:POLICY`` loads in the inbox tests."""

from __future__ import annotations

from _logged_policy import LoggedPolicy

from hpd_agent.governance import PathPolicy

POLICY = PathPolicy(
    {"alice": ["*"], "bob": ["Orchestrator", "Planner*"]}, permissions={"write_file": ["alice"]}
)
"""alice answers anything; bob the Orchestrator's own requests and the Planner's (not the
CodingAgent's below the Orchestrator), and only alice decides ``write_file``."""

LOGGED = LoggedPolicy(POLICY, "HPD_TEST_POLICY_LOG")
"""``POLICY``, each question it is asked written to the file ``$HPD_TEST_POLICY_LOG``."""
