"""The inbox tests need the web extra (their store, ``location``, is tests/conftest.py's)."""

from __future__ import annotations

import pytest

pytest.importorskip("starlette", reason='needs the web extra: pip install -e ".[web]"')
