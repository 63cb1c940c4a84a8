"""Fixtures of the model tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from _openai_server import OpenAIServer


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    """A loopback OpenAI-compatible server (``_openai_server``) for the test."""
    with OpenAIServer() as s:
        yield s
