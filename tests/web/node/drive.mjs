// Drives `hpd-agent serve tests.web.agents:root` with the real @ag-ui/client HttpAgent.
// Usage: node drive.mjs BASE_URL SCENARIO OUT_DIR
// Every response body is captured byte for byte to OUT_DIR/<scenario>-<n>.sse (for
// ag-ui-validate); a JSON summary of what the client saw is printed on stdout.
import { HttpAgent } from "@ag-ui/client";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const [base, scenario, outDir] = process.argv.slice(2);
mkdirSync(outDir, { recursive: true });
let captured = 0;

// A fetch that hands the client the body while keeping a copy of every byte.
async function capturingFetch(url, init) {
  const response = await fetch(url, init);
  const [forClient, forFile] = response.body.tee();
  const file = join(outDir, `${scenario}-${++captured}.sse`);
  new Response(forFile).text().then((text) => writeFileSync(file, text));
  return new Response(forClient, { status: response.status, headers: response.headers });
}

function newAgent(threadId) {
  return new HttpAgent({ url: `${base}/agent`, threadId, fetch: capturingFetch });
}

// One run: the events the client saw, by type, and the RUN_FINISHED it ended with.
async function run(agent, params, onCustom) {
  const seen = { types: [], finished: null, error: null, customs: [] };
  const result = await agent.runAgent(params, {
    onEvent: ({ event }) => { seen.types.push(event.type); },
    onRunFinishedEvent: ({ event }) => { seen.finished = event; },
    onRunErrorEvent: ({ event }) => { seen.error = event; },
    onCustomEvent: ({ event }) => {
      seen.customs.push(event);
      if (onCustom) onCustom(event);
    },
  });
  return { ...seen, result: result.result, newMessages: result.newMessages.length };
}

function say(agent, text) {
  agent.messages.push({ id: `u${agent.messages.length}`, role: "user", content: text });
}

async function answer(threadId, id, value) {
  const response = await fetch(`${base}/threads/${threadId}/requests/${id}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ answer: value }),
  });
  return { status: response.status, body: await response.json() };
}

const scenarios = {
  async chat() {
    const agent = newAgent("chat-thread");
    say(agent, "hello");
    return { runs: [await run(agent, {})], messages: agent.messages };
  },
  async tool() {
    const agent = newAgent("tool-thread");
    say(agent, "note");
    return { runs: [await run(agent, {})], messages: agent.messages };
  },
  async deep() {
    const agent = newAgent("deep-thread");
    say(agent, "deep");
    const first = await run(agent, {});
    const interrupts = first.finished.outcome.interrupts;
    const resume = interrupts.map((i) => ({ interruptId: i.id, status: "resolved", payload: "sqlite" }));
    const second = await run(agent, { resume });
    return { runs: [first, second], messages: agent.messages };
  },
  async parallel() {
    const agent = newAgent("parallel-thread");
    say(agent, "two");
    const first = await run(agent, {});
    const interrupts = first.finished.outcome.interrupts;
    const resume = [...interrupts].reverse().map((i) => ({
      interruptId: i.id,
      status: "resolved",
      payload: i.message === "Second question?" ? "the second answer" : "the first answer",
    }));
    const second = await run(agent, { resume });
    return { runs: [first, second], messages: agent.messages };
  },
  async live() {
    const threadId = "live-thread";
    const agent = newAgent(threadId);
    say(agent, "parallel");
    const asked = [];
    const answers = [];
    const onCustom = (event) => {
      if (event.name !== "hpd_agent.request") return;
      asked.push(event.value);
      if (asked.length === 2) {
        // Both questions are open: answer them in reverse order of arrival.
        (async () => {
          for (const request of [...asked].reverse()) {
            const value = request.question === "Which database?" ? "postgres" : "the first answer";
            answers.push(await answer(threadId, request.id, value));
          }
        })();
      }
    };
    const only = await run(agent, { forwardedProps: { hpd_agent: { mode: "live" } } }, onCustom);
    return { runs: [only], asked, answers, messages: agent.messages };
  },
};

const summary = await scenarios[scenario]();
process.stdout.write(JSON.stringify(summary));
