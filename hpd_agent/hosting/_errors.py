"""What a client of a server (web, MCP, A2A) may read of a run's failure."""

from __future__ import annotations

from ..exceptions import RunLeasedError
from ..text import bounded, error_text

__all__ = ["public_error"]

_LEASED = "RunLeasedError:"
"""How a stored run's error text (``RunRecord.error``) starts when a lease refused it."""


def public_error(error: BaseException | str, run_id: str) -> str:
    """What a client may read of ``error`` (an exception, or a stored run's error text):
    ``"TypeName: message"`` either way, never the run's secret id, nor who holds its lease
    (a host and a process id); bounded (``hpd_agent.text.bounded``)."""
    if isinstance(error, RunLeasedError):
        if error.lost:
            return "this server lost the run to another process, which continues it"
        return (
            "the run is being driven by another process: resume again once it has stopped "
            "(the run is left as it was)"
        )
    if isinstance(error, str):
        if error.startswith(_LEASED):
            return "the run was being driven by another process"
        text = error
    else:
        text = error_text(error)  # as a stored run's error reads: "TypeName: message"
    return bounded(text.replace(run_id, "the run"))
