"""What the MCP client raises: ``MCPServerError`` (the server) and ``MCPToolError`` (its
tool said the call failed: the model reads it as that call's error result)."""

from __future__ import annotations

from ..exceptions import HpdAgentError

__all__ = ["MCPServerError", "MCPToolError", "first_error"]


class MCPServerError(HpdAgentError):
    """An MCP server could not be reached, or it answered outside what this client does:
    an error response, a request it does not offer (sampling, roots), an elicitation that
    cannot be asked (a schema that cannot be checked), input asked for past the limit."""


class MCPToolError(HpdAgentError):
    """An MCP server's tool reported an error (``isError``); the message is its text.

    Raised inside the tool call, so the model gets it as that call's error result."""


def first_error(error: BaseException) -> BaseException:
    """The first error inside nested exception groups (the SDK's task groups wrap them)."""
    while isinstance(error, BaseExceptionGroup):
        group: BaseExceptionGroup[BaseException] = error  # pyright: ignore[reportUnknownVariableType]
        error = group.exceptions[0]
    return error
