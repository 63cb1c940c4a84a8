"""The public surface: what `import hpd_agent` offers, and that it stays cheap to import."""

from __future__ import annotations

import subprocess
import sys

import hpd_agent
import hpd_agent.testing


def test_all_names_exist_and_are_documented() -> None:
    for module in (hpd_agent, hpd_agent.testing):
        for name in module.__all__:
            obj = getattr(module, name)
            if name.startswith("__") or (not isinstance(obj, type) and not callable(obj)):
                continue
            if getattr(obj, "__module__", "").startswith("typing"):
                continue  # type aliases (unions, literals) are documented where defined
            assert obj.__doc__, f"{module.__name__}.{name} has no docstring"


def test_design_surface_is_exported() -> None:
    for name in [
        "Agent",
        "tool",
        "ask_user",
        "Tool",
        "ToolContext",
        "Run",
        "RunResult",
        "Handler",
        "Approve",
        "Deny",
        "ClarificationRequest",
        "PermissionRequest",
        "TextDelta",
        "HpdAgentError",
        "UserError",
    ]:
        assert name in hpd_agent.__all__


def test_exceptions_share_one_root() -> None:
    import hpd_agent.exceptions as exc

    for name in exc.__all__:
        cls = getattr(exc, name)
        assert issubclass(cls, exc.HpdAgentError)
        assert name in (exc.__doc__ or ""), f"{name} missing from the tree drawing"


def test_import_does_not_pull_litellm() -> None:
    code = "import sys, hpd_agent, hpd_agent.testing; print('litellm' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
