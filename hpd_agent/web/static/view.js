// The transcript: user prompts, and per run the served agent's turn: its steps (tool calls,
// the agents it called) and its answer, a message of its own, rebuilt from AG-UI events
// alone (live, or replayed after a reload). Every agent call is its own node, keyed by its
// subagentRunId (the call's invocation id): two parallel calls of one agent are two nodes,
// each labelled with its query; a finished one folds to one line ("Coder worked 4 s ·
// 2 tools"), opened on a click. A call of an agent as a tool is drawn as that agent's node
// alone (its query on the node, its answer as its own text, once); other tool calls are one
// line each, their arguments, result and id folded away in a <details>. Agent text is
// markdown (markdown.js), drawn at most once a frame while it streams.
import { argumentList, brief, fillArguments } from "./args.js";
import { el, prettyJSON } from "./dom.js";
import { renderMarkdown } from "./markdown.js";

const UNNAMED = "Agent"; // the root agent's label until the server says its name
const ASK_TOOL = "ask_user"; // the question tool: its row says who it asked
const raw = new WeakMap(); // agent text element -> the markdown it shows
const dirty = new Set(); // text elements to draw again on the next frame
let frame = 0;

function drawDirty() {
  frame = 0;
  for (const text of dirty) renderMarkdown(text, raw.get(text) || "");
  dirty.clear();
}

/** Adds `delta` to the markdown of `text`, drawn on the next frame (or now, when `now`). */
function write(text, delta, now = false) {
  raw.set(text, (raw.get(text) || "") + delta);
  dirty.add(text);
  if (now) drawDirty();
  else if (!frame) frame = requestAnimationFrame(drawDirty);
}

/** How long an agent worked, as people say it ("4 s", "2 min 5 s"). */
export function duration(ms) {
  const seconds = Math.max(1, Math.round(ms / 1000));
  if (seconds < 60) return `${seconds} s`;
  const rest = seconds % 60;
  return `${Math.floor(seconds / 60)} min${rest ? ` ${rest} s` : ""}`;
}

export class Transcript {
  /** @param {HTMLElement} root where the conversation is drawn. */
  constructor(root) {
    this.root = root;
    this.rootName = UNNAMED;
    this.rootNamed = false;
    this.onActivity = () => {}; // called with the name of the agent at work, or null
    this.reset();
  }

  /** Names the root agent (the server's GET /info, else the first agent of a request path). */
  setRootName(name) {
    if (!name) return;
    this.rootName = name;
    this.rootNamed = true;
    for (const node of this.roots) renameNode(node, name);
  }

  reset() {
    this.root.replaceChildren();
    this.agents = new Map(); // subagentRunId (one per agent call) -> agent node
    this.messages = new Map(); // messageId -> text element
    this.tools = new Map(); // toolCallId -> tool call node
    this.shownUsers = new Set(); // ids of user messages already drawn
    this.queuedUsers = []; // user messages (from GET /messages) awaiting their run
    this.run = null; // the current run's root agent node
    this.roots = []; // every run's root agent node
    this.working = []; // agent nodes at work, the latest last
  }

  /** User messages of the thread, drawn one per replayed run that does not carry its input. */
  queueUserMessages(messages) {
    this.queuedUsers = messages.filter((m) => m.role === "user" && !this.shownUsers.has(m.id));
  }

  addUserMessage(message) {
    if (message.id && this.shownUsers.has(message.id)) return;
    if (message.id) this.shownUsers.add(message.id);
    this.queuedUsers = this.queuedUsers.filter((m) => m.id !== message.id);
    const text = typeof message.content === "string" ? message.content : prettyJSON(message.content);
    this.root.append(
      el("div", { class: "user-message", role: "note", "aria-label": "You" },
        el("span", { class: "who" }, "You"), el("p", {}, text)),
    );
  }

  handle(event) {
    const handler = HANDLERS[event.type];
    if (handler) handler.call(this, event);
  }

  /** A sub-agent's node: a head that folds its body (its steps and words) away. */
  agentNode({ name, depth, runId, description }) {
    const body = el("div", { class: "agent-body" });
    const status = el("span", { class: "agent-status" });
    const summary = el("span", { class: "agent-summary" });
    const nameEl = el("span", { class: "agent-name" }, name);
    const toggle = el("button", {
      class: "agent-toggle", type: "button", "aria-expanded": "true",
      onclick: () => {
        node.opened = true; // the person's choice: no longer folded for them when it ends
        setOpen(node, toggle.getAttribute("aria-expanded") !== "true");
      },
    }, el("span", { class: "caret", "aria-hidden": "true" }), nameEl, summary);
    const call = description ? el("span", { class: "agent-call", title: description }, description) : null;
    const section = el("section", {
      class: "agent", "data-agent": name, "data-depth": depth, "data-run": runId,
      "aria-label": description ? `Agent ${name}: ${description}` : `Agent ${name}`,
    }, el("header", { class: "agent-head" }, toggle, call, status), body);
    const node = {
      section, body, status, summary, nameEl, depth, name, toggle, description: description || "",
      started: 0, toolCount: 0, opened: false,
    };
    return node;
  }

  /** The served agent's turn: its name over its steps and its answer. */
  rootNode(runId) {
    const body = el("div", { class: "agent-body" });
    const status = el("span", { class: "agent-status" });
    const nameEl = el("span", { class: "agent-name" }, this.rootName);
    const avatar = el("span", { class: "avatar", "aria-hidden": "true" }, initial(this.rootName));
    const section = el("section", {
      class: "agent root-agent", "data-agent": this.rootName, "data-depth": 0, "data-run": runId,
      "aria-label": `Agent ${this.rootName}`,
    }, el("header", { class: "agent-head" }, avatar, nameEl, status), body);
    return { section, body, status, nameEl, avatar, depth: 0, name: this.rootName, description: "", toolCount: 0 };
  }

  /** The agent node an event belongs to (its subagent, else the run's root agent). */
  ownerOf(event) {
    if (event.subagentRunId && this.agents.has(event.subagentRunId)) {
      return this.agents.get(event.subagentRunId);
    }
    if (!this.run) this.startRun({ runId: "" });
    return this.run;
  }

  startRun({ runId, input }) {
    const users = input && Array.isArray(input.messages)
      ? input.messages.filter((m) => m.role === "user") : [];
    if (users.length) this.addUserMessage(users[users.length - 1]);
    else if (this.queuedUsers.length) this.addUserMessage(this.queuedUsers[0]);
    const node = this.rootNode(runId);
    this.root.append(node.section);
    this.run = node;
    this.roots.push(node);
    this.working = [];
    this.setWorking(node, true);
    setStatus(node, "working");
  }

  /** Keeps the list of agents at work; says who works now (the latest still at it). */
  setWorking(node, working) {
    this.working = this.working.filter((n) => n !== node);
    if (working) this.working.push(node);
    const latest = this.working[this.working.length - 1];
    this.onActivity(latest ? latest.name : null);
  }

  textFor(event) {
    let text = this.messages.get(event.messageId);
    if (!text) {
      const owner = this.ownerOf(event);
      text = el("div", { class: "agent-text", "data-message": event.messageId, "aria-busy": "true" });
      owner.body.append(text);
      this.messages.set(event.messageId, text);
    }
    return text;
  }

  toolFor(event) {
    let call = this.tools.get(event.toolCallId);
    if (!call) {
      const owner = this.ownerOf(event);
      owner.toolCount += 1;
      const name = event.toolCallName || "tool";
      const args = argumentList({}, `Arguments of ${name}`);
      const result = el("pre", { class: "tool-result", "aria-label": `Result of ${name}`, hidden: true });
      const outcome = el("span", { class: "tool-brief" });
      const asked = el("span", { class: "tool-question" });
      const waiting = el("span", { class: "tool-waiting" });
      const nested = el("div", { class: "tool-nested" });
      const shown = name === ASK_TOOL ? "Asked you" : name;
      const details = el("details", { class: "tool-details" },
        el("summary", { class: "tool-head" }, el("span", { class: "tool-icon", "aria-hidden": "true" }),
          el("span", { class: "tool-name", title: name }, shown), asked, outcome, waiting),
        args, result, el("p", { class: "tool-id" }, "Call id ", el("code", {}, event.toolCallId)));
      const section = el("div", { class: "tool-call", "data-tool": name, "data-tool-call": event.toolCallId },
        details, nested);
      owner.body.append(section);
      call = { section, details, args, result, nested, outcome, waiting, asked, name, agent: null, argText: "" };
      this.tools.set(event.toolCallId, call);
    }
    return call;
  }
}

/** The question an ask_user call asks (its arguments' JSON), or "". */
function questionOf(argText) {
  try {
    const args = JSON.parse(argText);
    return args && typeof args.question === "string" ? brief(args.question) : "";
  } catch {
    return "";
  }
}

function initial(name) {
  return (Array.from(String(name).trim())[0] || "A").toUpperCase();
}

function renameNode(node, name) {
  node.name = name;
  node.section.dataset.agent = name;
  const label = node.description ? `Agent ${name}: ${node.description}` : `Agent ${name}`;
  node.section.setAttribute("aria-label", label);
  node.nameEl.textContent = name;
  if (node.avatar) node.avatar.textContent = initial(name);
}

function setOpen(node, open) {
  node.toggle.setAttribute("aria-expanded", String(open));
  node.body.hidden = !open;
}

/** Whether agent `node` already said `content` in its own words (its answer, streamed). */
function said(node, content) {
  const words = Array.from(node.body.children)
    .filter((child) => child.classList.contains("agent-text"))
    .map((child) => raw.get(child) || "").join("\n");
  return words.trim().includes(content.trim());
}

function setStatus(node, status, detail) {
  node.section.dataset.status = status;
  node.status.textContent = detail ? `${status}: ${detail}` : status;
}

/** A finished sub-agent folds to its head line: who, how long, how many tools. */
function finish(node, at) {
  const tools = node.toolCount ? ` · ${node.toolCount} tool${node.toolCount === 1 ? "" : "s"}` : "";
  node.summary.textContent = ` worked ${duration(at - node.started)}${tools}`;
  if (!node.opened) setOpen(node, false);
}

function timeOf(event) {
  return typeof event.timestamp === "number" && event.timestamp > 0 ? event.timestamp : Date.now();
}

const HANDLERS = {
  RUN_STARTED(event) {
    this.startRun(event);
  },
  RUN_FINISHED(event) {
    if (!this.run) return;
    const interrupted = event.outcome && event.outcome.type === "interrupt";
    setStatus(this.run, interrupted ? "waiting for answers" : "done");
    this.working = [];
    this.onActivity(null);
  },
  RUN_ERROR(event) {
    if (!this.run) this.startRun({ runId: "" });
    setStatus(this.run, "error", event.message);
    this.run.body.append(el("p", { class: "run-error", role: "alert" }, `Error: ${event.message}`));
    this.working = [];
    this.onActivity(null);
  },
  TEXT_MESSAGE_START(event) {
    this.textFor(event);
  },
  TEXT_MESSAGE_CONTENT(event) {
    write(this.textFor(event), event.delta);
  },
  TEXT_MESSAGE_CHUNK(event) {
    if (event.messageId && event.delta) write(this.textFor(event), event.delta);
  },
  TEXT_MESSAGE_END(event) {
    const text = this.textFor(event);
    write(text, "", true);
    text.classList.add("complete");
    text.removeAttribute("aria-busy"); // a screen reader reads it whole, once
  },
  TOOL_CALL_START(event) {
    this.toolFor(event);
  },
  TOOL_CALL_ARGS(event) {
    const call = this.toolFor(event);
    call.argText += event.delta;
  },
  TOOL_CALL_CHUNK(event) {
    if (!event.toolCallId) return;
    HANDLERS.TOOL_CALL_ARGS.call(this, { ...event, delta: event.delta || "" });
  },
  TOOL_CALL_END(event) {
    const call = this.toolFor(event);
    fillArguments(call.args, call.argText);
    call.section.classList.add("called");
    if (call.name === ASK_TOOL) call.asked.textContent = questionOf(call.argText);
  },
  TOOL_CALL_RESULT(event) {
    const call = this.toolFor(event);
    const content = typeof event.content === "string" ? event.content : prettyJSON(event.content);
    call.section.classList.add("done");
    if (call.agent) {
      // An agent's answer is its own last words: shown once, in its node.
      if (!said(call.agent, content)) {
        const answer = el("div", { class: "agent-text agent-answer complete" });
        call.agent.body.append(answer);
        write(answer, content, true);
      }
      return;
    }
    call.result.hidden = false;
    call.result.textContent = content;
    call.outcome.textContent = brief(content);
  },
  SUBAGENT_STARTED(event) {
    const parent = (event.parentSubagentRunId && this.agents.get(event.parentSubagentRunId)) || this.ownerOf({});
    const node = this.agentNode({
      name: event.name, depth: parent.depth + 1, runId: event.subagentRunId, description: event.description,
    });
    node.started = timeOf(event);
    const call = event.parentToolCallId && this.tools.get(event.parentToolCallId);
    if (call) {
      // The call is the agent's node now: its query labels the node, its answer is its text.
      call.agent = node;
      call.section.classList.add("agent-call-box");
      call.details.remove();
    }
    (call ? call.nested : parent.body).append(node.section);
    this.agents.set(event.subagentRunId, node);
    setStatus(node, "working");
    this.setWorking(node, true);
  },
  SUBAGENT_FINISHED(event) {
    const node = this.agents.get(event.subagentRunId);
    if (!node) return;
    const suspended = event.outcome && event.outcome.type === "suspended";
    setStatus(node, suspended ? "waiting for answers" : "done");
    this.setWorking(node, false);
    if (!suspended) finish(node, timeOf(event));
  },
  SUBAGENT_ERROR(event) {
    const node = this.agents.get(event.subagentRunId);
    if (!node) return;
    setStatus(node, "error", event.message);
    this.setWorking(node, false);
  },
  MESSAGES_SNAPSHOT(event) {
    for (const m of event.messages || []) {
      if (m.role === "user" && m.id) this.shownUsers.add(m.id);
    }
  },
};

/** What to call the agent call `subagentRunId` on a question card: its query, if known. */
export function callLabel(transcript, subagentRunId) {
  const node = subagentRunId && transcript.agents.get(subagentRunId);
  return node ? node.description || "" : "";
}

/** Marks the agent that asked `request` as waiting on the human (or not any more). */
export function markAsking(transcript, request, asking) {
  const node = transcript.ownerOf({ subagentRunId: request.subagentRunId });
  const count = Math.max(0, Number(node.section.dataset.asking || 0) + (asking ? 1 : -1));
  node.section.dataset.asking = String(count);
  node.section.classList.toggle("asking", count > 0);
  const call = request.toolCallId && transcript.tools.get(request.toolCallId);
  if (call) {
    call.section.classList.toggle("asking", asking);
    const what = request.kind === "permission" ? "your permission" : "your answer";
    call.waiting.textContent = asking ? `waiting for ${what}` : "";
  }
  const path = request.agentPath;
  if (!transcript.rootNamed && Array.isArray(path) && path.length) transcript.setRootName(path[0]);
}
