"""What a client of a server (web, MCP, A2A) may read of a run's failure."""

from __future__ import annotations

from ..exceptions import RunLeasedError
from ..text import bounded

__all__ = ["public_error"]


def public_error(error: BaseException, run_id: str) -> str:
    """What a client may read of ``error``: never the run's secret id, nor who holds its
    lease (a host and a process id); bounded (``hpd_agent.text.bounded``)."""
    if isinstance(error, RunLeasedError):
        if error.lost:
            return "this server lost the run to another process, which continues it"
        return (
            "the run is being driven by another process: resume again once it has stopped "
            "(the run is left as it was)"
        )
    return bounded((str(error) or type(error).__name__).replace(run_id, "the run"))
