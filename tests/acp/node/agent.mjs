// An ACP agent written with the official TypeScript SDK (@agentclientprotocol/sdk 2.4.0,
// stable v1 entry point: agent().onRequest(...).connect(ndJsonStream(...))), driven by its
// prompt exactly as tests/acp/acp_py_agent.py is (see that file for the steps).
// Usage: node agent.mjs LOG
import { appendFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import { agent, methods, ndJsonStream } from "@agentclientprotocol/sdk";

const LOG = process.argv[2];
const KINDS = ["allow_once", "allow_always", "reject_once", "reject_always"];
const log = (line) => appendFileSync(LOG, line + "\n");
const cancelled = new Map(); // session id -> resolve of its cancel
let sessions = 0;

const say = (client, sessionId, text) =>
  client.notify(methods.client.session.update, {
    sessionId,
    update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text } },
  });

const meta = (path) => (path === undefined ? {} : { _meta: { hpd_agent: { agent_path: path } } });

async function permission(client, sessionId, p) {
  const got = await client.request(methods.client.session.requestPermission, {
    sessionId,
    toolCall: { toolCallId: "call-1", title: p.title, rawInput: p.rawInput, ...meta(p.path) },
    options: (p.options ?? KINDS).map((k) => ({ optionId: `o-${k}`, name: k, kind: k })),
  });
  const said = got.outcome.outcome === "selected" ? got.outcome.optionId : "cancelled";
  log(`permission ${said}`);
  await say(client, sessionId, `[permission ${said}]`);
}

const sorted = (value) =>
  value && typeof value === "object" && !Array.isArray(value)
    ? Object.fromEntries(Object.keys(value).sort().map((k) => [k, sorted(value[k])]))
    : value;

async function elicit(client, sessionId, e) {
  const params =
    e.mode === "url"
      ? { sessionId, mode: "url", message: e.message, elicitationId: "u1", url: "https://example.com/x" }
      : { sessionId, mode: "form", message: e.message, requestedSchema: e.schema };
  let said;
  try {
    const got = await client.request(methods.client.elicitation.create, { ...params, ...meta(e.path) });
    said = JSON.stringify(sorted(got)).replaceAll(",", ", ").replaceAll(":", ": ");
  } catch (err) {
    said = `error ${err.code}`;
  }
  log(`elicit ${said}`);
  await say(client, sessionId, `[elicit ${said}]`);
}

async function files(client, sessionId, step) {
  let said;
  try {
    if (step.read) {
      const r = step.read;
      const got = await client.request(methods.client.fs.readTextFile, { sessionId, ...r });
      said = `[read ${got.content}]`;
    } else {
      await client.request(methods.client.fs.writeTextFile, { sessionId, ...step.write });
      said = "[wrote]";
    }
  } catch (err) {
    said = `[error ${err.code} ${err.message}]`;
  }
  await say(client, sessionId, said);
}

async function call(client, sessionId, requestId, c) {
  const params = "requestId" in c.params ? { ...c.params, requestId } : { sessionId, ...c.params };
  let said;
  try {
    said = `[call ${JSON.stringify(sorted(await client.request(c.method, params)))}]`;
  } catch (err) {
    said = `[error ${err.code} ${err.message}]`;
  }
  await say(client, sessionId, said);
}

async function run(client, sessionId, requestId, step) {
  if ("say" in step) await say(client, sessionId, step.say);
  else if ("permission" in step) await permission(client, sessionId, step.permission);
  else if ("elicit" in step) await elicit(client, sessionId, step.elicit);
  else if ("read" in step || "write" in step) await files(client, sessionId, step);
  else if ("call" in step) await call(client, sessionId, requestId, step.call);
  else if ("pid" in step) await say(client, sessionId, String(process.pid));
  else if ("env" in step) await say(client, sessionId, process.env[step.env] ?? "<unset>");
  else if ("exit" in step) process.exit(step.exit);
  else if ("wait_cancel" in step) {
    await cancelled.get(sessionId).promise;
    return "cancelled";
  } else if ("stop" in step) return step.stop;
  return null;
}

const app = agent({ name: "ts-agent" })
  .onRequest(methods.agent.initialize, ({ params }) => {
    const caps = params.clientCapabilities;
    log(`initialize ${JSON.stringify({ protocolVersion: params.protocolVersion, caps })}`);
    return { protocolVersion: 1, agentCapabilities: {}, agentInfo: { name: "ts-agent", version: "1" } };
  })
  .onRequest(methods.agent.session.new, ({ params }) => {
    sessions += 1;
    const sessionId = `ts-${process.pid}-${sessions}`;
    let resolve;
    const promise = new Promise((r) => (resolve = r));
    cancelled.set(sessionId, { promise, resolve });
    log(`session/new ${params.cwd}`);
    return { sessionId };
  })
  .onNotification(methods.agent.session.cancel, ({ params }) => {
    log(`cancel ${params.sessionId}`);
    cancelled.get(params.sessionId)?.resolve();
  })
  .onRequest(methods.agent.session.prompt, async ({ params, client, requestId }) => {
    const { steps } = JSON.parse(params.prompt[0].text);
    for (const step of steps) {
      const stop = await run(client, params.sessionId, requestId, step);
      if (stop !== null) return { stopReason: stop };
    }
    return { stopReason: "end_turn" };
  });

// Each incoming message, as it arrives, to LOG.wire: its method, or "response".
let pending = "";
const decoder = new TextDecoder();
const arrival = new TransformStream({
  transform(chunk, controller) {
    pending += decoder.decode(chunk, { stream: true });
    const lines = pending.split("\n");
    pending = lines.pop();
    for (const line of lines.filter((l) => l.trim())) {
      appendFileSync(`${LOG}.wire`, (JSON.parse(line).method ?? "response") + "\n");
    }
    controller.enqueue(chunk);
  },
});
const input = Readable.toWeb(process.stdin).pipeThrough(arrival);
const connection = app.connect(ndJsonStream(Writable.toWeb(process.stdout), input));
await connection.closed;
process.exit(0);
