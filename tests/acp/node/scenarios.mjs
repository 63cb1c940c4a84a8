// The scenarios, one per numbered behaviour of the server (docs/acp.md, "Serving an agent to an
// editor"): each drives `hpd-agent acp` with the official TypeScript SDK's client and returns
// what it saw; tests/acp/test_acp_conformance.py checks it.
import {
  Server,
  counted,
  editor,
  failure,
  initialize,
  newSession,
  prompt,
  requests,
  said,
  selected,
  signal,
  text,
  updates,
  acp,
} from "./lib.mjs";

/** Serve `args`, run `op(ctx, ed)` on a connection, then end the server; both results. */
async function served(args, options, op) {
  const server = new Server(args);
  const ed = editor(options);
  const seen = await ed.app.connectWith(server.stream, async (ctx) => {
    const init = await initialize(ctx, ed.caps);
    return { init, ...(await op(ctx, ed)) };
  });
  return { ...seen, log: ed.log, end: await server.ended() };
}

// 2, 4, 5, 6: initialize, sessions, prompts, stop reasons, errors
export async function basics() {
  const echo = await served(["acp_agents:echo"], {}, async (ctx, ed) => {
    const one = await newSession(ctx);
    const two = await newSession(ctx);
    const stops = [];
    for (const p of ["a", "b", "c"]) stops.push(await prompt(ctx, ed.log, one, p));
    await prompt(ctx, ed.log, two, "x");
    const three = await newSession(ctx);
    await prompt(ctx, ed.log, three, [
      text("one"),
      { type: "resource_link", name: "x.py", uri: "file:///src/x.py" },
      { type: "resource", resource: { uri: "file:///notes.md", text: "two" } },
    ]);
    return {
      sessions: [one, two, three],
      stops,
      said: [said(ed.log, one), said(ed.log, two), said(ed.log, three)],
      chunks: updates(ed.log, two).length,
      unknown: await failure(prompt(ctx, ed.log, "sess_nope", "hi")),
      load: await failure(
        ctx.request(acp.methods.agent.session.load, { sessionId: one, cwd: "/tmp", mcpServers: [] }),
      ),
    };
  });
  const looper = await served(["acp_agents:looper"], {}, async (ctx, ed) => ({
    stop: await prompt(ctx, ed.log, await newSession(ctx), "go"),
  }));
  const broken = await served(["acp_agents:broken"], {}, async (ctx, ed) => ({
    error: await failure(prompt(ctx, ed.log, await newSession(ctx), "go")),
  }));
  return { echo: { ...echo, log: undefined }, looper, broken };
}

// 7, 9 (and 23's server part): the tree's tool calls, the root's text, a deep permission;
// a tool that fails
export async function stream() {
  const top = await served(["acp_agents:top"], { permission: async () => selected("approve_once") }, async (ctx, ed) => {
    const session = await newSession(ctx);
    const stop = await prompt(ctx, ed.log, session, "1");
    return { session, stop, said: said(ed.log, session) };
  });
  const fumbler = await served(["acp_agents:fumbler"], {}, async (ctx, ed) => {
    const session = await newSession(ctx);
    const stop = await prompt(ctx, ed.log, session, "go");
    return { stop, updates: updates(ed.log, session) };
  });
  return { ...top, fumbler: { ...fumbler, log: undefined } };
}

// 6: a prompt while the session's turn still runs is refused; the running turn goes on
export async function busy() {
  const asked = signal();
  const refused = signal();
  const permission = async () => {
    asked.resolve();
    await refused.promise; // the turn waits here while the second prompt comes
    return selected("approve_once");
  };
  return served(["acp_agents:top"], { permission }, async (ctx, ed) => {
    const session = await newSession(ctx);
    const turn = prompt(ctx, ed.log, session, "1");
    await asked.promise;
    const second = await failure(prompt(ctx, ed.log, session, "1"));
    refused.resolve();
    const other = await newSession(ctx); // another session is not held up meanwhile
    return { second, stop: await turn, effects: counted("effect"), other: other !== session };
  });
}

// 9: each permission outcome
export async function permissions() {
  const outcomes = ["approve_once", "approve_run", "deny", null, "bogus"];
  let current = null;
  const permission = async () =>
    current === null ? { outcome: { outcome: "cancelled" } } : selected(current);
  return served(["acp_agents:top"], { permission }, async (ctx, ed) => {
    const runs = [];
    for (const option of outcomes) {
      current = option;
      const before = counted("effect").length;
      const session = await newSession(ctx);
      const stop = await prompt(ctx, ed.log, session, "2");
      const asked = requests(ed.log, "session/request_permission", session);
      runs.push({ option, stop, asked: asked.length, effects: counted("effect").slice(before), said: said(ed.log, session), ends: updates(ed.log, session).filter((u) => u.sessionUpdate === "tool_call_update").map((u) => u.content[0].content.text) });
    }
    return { runs };
  });
}

// 8: the questions of parallel branches, outstanding together, answered in reverse order
export async function parallel() {
  const both = signal();
  const slowAnswered = signal();
  let count = 0;
  const form = async (params) => {
    if (++count === 2) both.resolve();
    await both.promise;
    if (params.message.includes("colour")) {
      await slowAnswered.promise;
      return { action: "accept", content: { answer: "red" } };
    }
    slowAnswered.resolve();
    return { action: "accept", content: { answer: "large" } };
  };
  return served(["acp_agents:lead"], { form }, async (ctx, ed) => {
    const session = await newSession(ctx);
    const stop = await prompt(ctx, ed.log, session, "go");
    return { stop, said: said(ed.log, session), asked: requests(ed.log, "elicitation/create").map((p) => p.message) };
  });
}

// 10: every kind as a form; a refused answer asked again; decline; cancel
const ANSWERS = {
  text: { answer: "Ada" },
  text_options: { answer: "spaces" },
  input: { answer: "bob" },
  choice: { answer: "green" },
  choices: { answer: ["blue", "red"] },
  confirm: { answer: true },
  custom_flat: { name: "Ada", age: 3 },
  custom_nested: { answer: '{"range": {"from": 2}}' },
};

export async function forms() {
  let reply = null;
  const form = async (params) => reply(params);
  return served(["acp_agents:asker"], { form }, async (ctx, ed) => {
    const kinds = {};
    for (const [kind, content] of Object.entries(ANSWERS)) {
      reply = async () => ({ action: "accept", content });
      kinds[kind] = await ask(ctx, ed, kind);
    }
    const refused = [{ answer: "  " }, { answer: "bob" }];
    reply = async () => ({ action: "accept", content: refused.shift() });
    kinds.refused = await ask(ctx, ed, "input");
    reply = async () => ({ action: "decline" });
    kinds.decline = await ask(ctx, ed, "text");
    reply = async () => ({ action: "cancel" });
    kinds.cancel = await ask(ctx, ed, "text");
    return { kinds };
  });
}

async function ask(ctx, ed, kind) {
  const before = counted("effect").length;
  const session = await newSession(ctx);
  const stop = await prompt(ctx, ed.log, session, kind);
  const calls = updates(ed.log, session);
  return {
    stop,
    forms: requests(ed.log, "elicitation/create", session),
    permissions: requests(ed.log, "session/request_permission", session),
    call: calls.find((u) => u.sessionUpdate === "tool_call" && u.title === "Asker: kinds"),
    result: calls.filter((u) => u.sessionUpdate === "tool_call_update").map((u) => u.content[0].content.text)[0],
    effects: counted("effect").slice(before),
  };
}

// 11: a client without forms (a choice dismissed: picks has no answer for it)
export async function fallback() {
  const picks = { confirm: "No", choice: "green", text_options: "tabs" };
  let kind = null;
  const permission = async (params) => {
    const option = params.options.find((o) => o.name === picks[kind]);
    return option ? selected(option.optionId) : { outcome: { outcome: "cancelled" } };
  };
  return served(["acp_agents:asker"], { forms: false, permission }, async (ctx, ed) => {
    const kinds = {};
    for (kind of ["confirm", "choice", "text_options", "text", "input", "choices", "custom_flat", "action"]) {
      kinds[kind] = await ask(ctx, ed, kind);
    }
    delete picks.choice;
    kind = "choice";
    kinds.dismissed = await ask(ctx, ed, "choice");
    return { kinds };
  });
}

// 12: session/cancel answers the prompt at once; a late reply reaches nobody
export async function cancel() {
  const asked = signal();
  const release = signal();
  let calls = 0;
  const permission = async () => {
    if (++calls === 1) {
      asked.resolve();
      await release.promise; // answered only after the turn was cancelled
    }
    return selected("approve_once");
  };
  return served(["acp_agents:top"], { permission }, async (ctx, ed) => {
    const session = await newSession(ctx);
    const turn = prompt(ctx, ed.log, session, "1");
    await asked.promise;
    const sent = Date.now();
    await ctx.notify(acp.methods.agent.session.cancel, { sessionId: session });
    const stop = await turn;
    const ms = Date.now() - sent;
    release.resolve();
    const effectsAfterCancel = counted("effect");
    const next = await prompt(ctx, ed.log, session, "1");
    const first = ed.log.findIndex((m) => m.response === "session/prompt");
    const turnOne = ed.log.slice(0, first).filter((m) => m.method === "session/update").map((m) => m.params.update);
    return { stop, ms, effectsAfterCancel, next, effects: counted("effect"), asked: calls, turnOne };
  });
}

// 13: a store: the server killed while a question waits, restarted, the session loaded and
// its turn resumed by the next prompt
export async function restart() {
  const store = process.env.HPD_ACP_STORE;
  const args = ["acp_agents:planner", "--store", store];
  const first = new Server(args);
  const waiting = signal();
  const ed1 = editor({ form: async () => { waiting.resolve(); return new Promise(() => {}); } });
  let session = null;
  let killed = null;
  await ed1.app.connectWith(first.stream, async (ctx) => {
    await initialize(ctx, ed1.caps);
    session = await newSession(ctx);
    const turn = failure(prompt(ctx, ed1.log, session, "a plan"));
    await waiting.promise;
    killed = await first.kill();
    await turn;
  }).catch(() => {});
  const second = await served(args, { form: async () => ({ action: "accept", content: { answer: "PostgreSQL" } }) }, async (ctx, ed) => {
    await ctx.request(acp.methods.agent.session.load, { sessionId: session, cwd: "/tmp", mcpServers: [] });
    const replayed = updates(ed.log, session).map((u) => [u.sessionUpdate, u.content.text]);
    const stop = await prompt(ctx, ed.log, session, "and the tests");
    return {
      replayed,
      stop,
      said: said(ed.log, session),
      asked: requests(ed.log, "elicitation/create").map((p) => p.message),
      unknown: await failure(ctx.request(acp.methods.agent.session.load, { sessionId: "sess_nope", cwd: "/tmp", mcpServers: [] })),
    };
  });
  return { killed, firstPid: first.pid, ...second, log: undefined, effects: counted("effect"), models: counted("model") };
}

// 2: nothing but protocol messages on stdout, whatever the agent prints
export async function stdout() {
  return served(["acp_agents:noisy"], {}, async (ctx, ed) => {
    const session = await newSession(ctx);
    const stop = await prompt(ctx, ed.log, session, "x");
    return { stop, said: said(ed.log, session) };
  });
}

// 23, the server's part: the path of a deep question and of a deep permission, for programs
export async function headline() {
  const planner = await served(["acp_agents:planner"], { form: async () => ({ action: "accept", content: { answer: "SQLite" } }) }, async (ctx, ed) => {
    const session = await newSession(ctx);
    const stop = await prompt(ctx, ed.log, session, "a plan");
    return { stop, said: said(ed.log, session), form: requests(ed.log, "elicitation/create")[0] };
  });
  const top = await served(["acp_agents:top"], { permission: async () => selected("approve_once") }, async (ctx, ed) => {
    const session = await newSession(ctx);
    const stop = await prompt(ctx, ed.log, session, "1");
    return { stop, permission: requests(ed.log, "session/request_permission")[0] };
  });
  return { planner: { ...planner, log: undefined }, top: { ...top, log: undefined } };
}

// issue 35 item 2: answers given through the editor, kept in the store (the test reads who
// answered: this client's clientInfo.name, on channel acp)
export async function answered() {
  const store = process.env.HPD_ACP_STORE;
  const form = async () => ({ action: "accept", content: { answer: "SQLite" } });
  const planner = await served(["acp_agents:planner", "--store", store], { form }, async (ctx, ed) => ({
    stop: await prompt(ctx, ed.log, await newSession(ctx), "a plan"),
  }));
  const permission = async () => selected("approve_once");
  const top = await served(["acp_agents:top", "--store", store], { permission }, async (ctx, ed) => ({
    stop: await prompt(ctx, ed.log, await newSession(ctx), "1"),
  }));
  return { planner: { ...planner, log: undefined }, top: { ...top, log: undefined } };
}

// 13: a store: completed turns replayed by session/load after the server ended, the history
// going on from there
export async function reload() {
  const args = ["acp_agents:echo", "--store", process.env.HPD_ACP_STORE];
  let session = null;
  const first = await served(args, {}, async (ctx, ed) => {
    session = await newSession(ctx);
    const stops = [await prompt(ctx, ed.log, session, "a"), await prompt(ctx, ed.log, session, "b")];
    return { stops };
  });
  const second = await served(args, {}, async (ctx, ed) => {
    await ctx.request(acp.methods.agent.session.load, { sessionId: session, cwd: "/tmp", mcpServers: [] });
    const replayed = updates(ed.log, session).map((u) => [u.sessionUpdate, u.content.text]);
    const before = updates(ed.log, session).length;
    const stop = await prompt(ctx, ed.log, session, "c");
    const next = updates(ed.log, session).slice(before).filter((u) => u.sessionUpdate === "agent_message_chunk").map((u) => u.content.text).join("");
    return { replayed, stop, next };
  });
  return { first: { ...first, log: undefined }, second: { ...second, log: undefined } };
}

// 2: stdin closed while a turn waits for the editor: the server ends its run and exits
export async function hangup() {
  const server = new Server(["acp_agents:planner"]);
  const waiting = signal();
  const ed = editor({ form: async () => { waiting.resolve(); return new Promise(() => {}); } });
  let turn = null;
  const connection = ed.app.connectWith(server.stream, async (ctx) => {
    await initialize(ctx, ed.caps);
    const session = await newSession(ctx);
    turn = failure(prompt(ctx, ed.log, session, "a plan"));
    await waiting.promise;
    await turn;
  }).catch((e) => ({ error: String(e) }));
  await waiting.promise;
  const end = await server.ended();
  return { end, turn: await turn, connection: await connection, effects: counted("effect") };
}
