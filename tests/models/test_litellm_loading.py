"""litellm is imported in the background from the moment an agent gets a model string, so the
first request does not wait seconds for it; ``import hpd_agent`` and offline agents never
import it. Each case runs in a fresh interpreter: an import happens once per process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_THREAD = "[t for t in threading.enumerate() if t.name == 'hpd-agent: import litellm']"


def _python(code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )


def test_building_an_agent_with_a_model_string_starts_importing_litellm() -> None:
    out = _python(
        "import os, sys, threading\n"
        "from hpd_agent import Agent\n"
        "from hpd_agent.testing import ScriptedModel\n"
        "Agent('Offline', model=ScriptedModel([]))\n"
        f"assert {_THREAD} == [], 'an offline agent started the import'\n"
        "assert 'litellm' not in sys.modules\n"
        "agent = Agent('Online', model='openai/gpt-4o-mini')\n"
        f"[thread] = {_THREAD}\n"
        "assert not thread.daemon  # the process exits after it, never during it\n"
        "thread.join()\n"
        "assert 'litellm' in sys.modules\n"
        "assert os.environ['LITELLM_LOCAL_MODEL_COST_MAP'] == 'True'\n"
        "Agent('Second', model='openai/gpt-4o-mini')\n"
        f"assert {_THREAD} == [], 'a second import was started'\n"
        "print(type(agent.model).__name__)\n"
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "LiteLLMModel"


def test_a_failed_background_import_is_said_at_first_use() -> None:
    out = _python(
        "import sys, threading\n"
        "sys.modules['litellm'] = None  # importing litellm now fails\n"
        "from hpd_agent import Agent\n"
        "from hpd_agent.exceptions import ModelError\n"
        "agent = Agent('Online', model='openai/gpt-4o-mini')  # building does not fail\n"
        "try:\n"
        "    agent.model\n"
        "except ModelError as e:\n"
        "    print(e)\n"
        "    print(type(e.__cause__).__name__)\n"
    )
    assert out.returncode == 0, out.stderr
    said, cause = out.stdout.strip().splitlines()
    assert said.startswith(
        "model 'openai/gpt-4o-mini': importing litellm failed (in the background, when the "
        "agent was built): ModuleNotFoundError: "
    ), said
    assert cause == "ModuleNotFoundError"


def test_a_process_that_ends_right_after_building_the_agent_exits() -> None:
    out = _python(
        "import atexit, importlib\n"
        "from hpd_agent import Agent\n"
        "Agent('Online', model='openai/gpt-4o-mini')\n"
        "atexit.register(lambda: importlib.import_module('litellm.proxy._types'))\n"
        "print('built')\n"
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "built"
