// What the scenarios share: `hpd-agent acp` in a child process, and an editor built with the
// official ACP TypeScript SDK's client (client().onRequest(...).onNotification(...), then
// connectWith(ndJsonStream(...), ctx => ...)), recording every message the agent sends.
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { PassThrough, Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

export { acp };

// The command line up to the agent reference: [python, -m, hpd_agent.cli, acp].
const COMMAND = JSON.parse(process.env.HPD_ACP_COMMAND);

export function counted(kind) {
  const path = `${process.env.HPD_ACP_TEST_DIR}/${kind}.txt`;
  return existsSync(path) ? readFileSync(path, "utf8").split("\n").filter(Boolean) : [];
}

/** `hpd-agent acp ARGS` in a child process, its stdout both read by the SDK and recorded. */
export class Server {
  constructor(args) {
    this.child = spawn(COMMAND[0], [...COMMAND.slice(1), ...args], {
      stdio: ["pipe", "pipe", "pipe"],
    });
    this.pid = this.child.pid;
    this.out = [];
    this.err = "";
    const tap = new PassThrough();
    this.child.stdout.on("data", (d) => this.out.push(d));
    this.child.stdout.pipe(tap);
    this.child.stderr.on("data", (d) => (this.err += d));
    this.exit = new Promise((resolve) =>
      this.child.on("exit", (code, signal) => resolve({ code, signal })),
    );
    this.stream = acp.ndJsonStream(Writable.toWeb(this.child.stdin), Readable.toWeb(tap));
  }

  /** Every line the server wrote to stdout is a JSON-RPC 2.0 message. */
  stdoutClean() {
    const text = Buffer.concat(this.out).toString("utf8");
    return text.split("\n").every((line) => {
      if (!line) return true;
      try {
        return JSON.parse(line).jsonrpc === "2.0";
      } catch {
        return false;
      }
    });
  }

  /** Close its stdin (if still open), wait for it to exit: how, and how long it took. */
  async ended() {
    const started = Date.now();
    if (!this.child.stdin.destroyed) this.child.stdin.end();
    const { code, signal } = await this.exit;
    return {
      code,
      signal,
      ms: Date.now() - started,
      pid: this.pid,
      stdoutClean: this.stdoutClean(),
      stderr: this.err,
    };
  }

  kill() {
    this.child.kill("SIGKILL");
    return this.exit;
  }
}

/** An editor: records what the agent sends; answers with the scenario's callbacks. */
export function editor({ forms = true, permission, form } = {}) {
  const log = [];
  const app = acp
    .client({ name: "hpd-agent-tests" })
    .onNotification(acp.methods.client.session.update, ({ params }) => {
      log.push({ method: "session/update", params });
    })
    .onRequest(acp.methods.client.session.requestPermission, async ({ params }) => {
      log.push({ method: "session/request_permission", params });
      return permission
        ? await permission(params)
        : { outcome: { outcome: "cancelled" } };
    })
    .onRequest(acp.methods.client.elicitation.create, async ({ params }) => {
      log.push({ method: "elicitation/create", params });
      if (!forms || !form) throw acp.RequestError.methodNotFound("elicitation/create");
      return await form(params);
    });
  const caps = forms ? { elicitation: { form: {} } } : {};
  return { app, log, caps };
}

export const text = (t) => ({ type: "text", text: t });

export async function initialize(ctx, caps) {
  return ctx.request(acp.methods.agent.initialize, {
    protocolVersion: 1,
    clientCapabilities: caps,
    clientInfo: { name: "hpd-agent-tests", version: "1" },
  });
}

export async function newSession(ctx, cwd = "/tmp") {
  return (await ctx.request(acp.methods.agent.session.new, { cwd, mcpServers: [] })).sessionId;
}

export async function prompt(ctx, log, sessionId, blocks) {
  const prompt = typeof blocks === "string" ? [text(blocks)] : blocks;
  const answer = await ctx.request(acp.methods.agent.session.prompt, { sessionId, prompt });
  log.push({ response: "session/prompt", sessionId, answer });
  return answer.stopReason;
}

export async function failure(promise) {
  try {
    await promise;
    return null;
  } catch (e) {
    return { code: e.code, message: e.message };
  }
}

export function updates(log, sessionId) {
  return log
    .filter((m) => m.method === "session/update" && m.params.sessionId === sessionId)
    .map((m) => m.params.update);
}

export function said(log, sessionId, kind = "agent_message_chunk") {
  return updates(log, sessionId)
    .filter((u) => u.sessionUpdate === kind)
    .map((u) => u.content.text)
    .join("");
}

export function requests(log, method, sessionId) {
  return log
    .filter((m) => m.method === method && (!sessionId || m.params.sessionId === sessionId))
    .map((m) => m.params);
}

export function selected(optionId) {
  return { outcome: { outcome: "selected", optionId } };
}

/** A promise and the function that resolves it. */
export function signal() {
  let resolve;
  const promise = new Promise((r) => (resolve = r));
  return { promise, resolve };
}
