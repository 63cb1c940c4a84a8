"""Hello: one agent, one run, text streamed as it arrives.

Runs offline: a ScriptedModel plays the LLM. Swap in ``model="openai/gpt-4o-mini"`` (with
OPENAI_API_KEY set) to run it on a real model.

    python examples/hello.py
"""

from __future__ import annotations

import anyio

from hpd_agent import Agent
from hpd_agent.events import TextDelta
from hpd_agent.testing import ScriptedModel, text

model = ScriptedModel(
    [
        text("Hello! I am an hpd_agent agent.", input_tokens=12, output_tokens=8),
        text("Hello again, piece by piece.", input_tokens=14, output_tokens=7),
    ],
    chunk_size=6,  # stream the text in pieces of six characters, as a real model would
)
agent = Agent("Greeter", model=model, instructions="Greet the user in one sentence.")


async def main() -> None:
    # One call: run to the final answer.
    result = await agent.run("Say hello")
    print("run():", result.output)

    # Or watch it stream.
    async with agent.stream("Say hello again") as run:
        pieces = [event.text async for event in run if isinstance(event, TextDelta)]
    print("stream():", " | ".join(pieces))
    print("tokens and requests:", run.result.usage)


if __name__ == "__main__":
    anyio.run(main)
