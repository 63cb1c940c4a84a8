// The transcript: user prompts, and per run the tree of agents with their streamed text and
// tool calls, rebuilt from AG-UI events alone (live, or replayed after a reload). Every agent
// call is its own node, keyed by its subagentRunId (the call's invocation id): two parallel
// calls of one agent are two nodes, each labelled with its query. A call of an agent as a
// tool is drawn as that agent's node alone (its query on the node, its answer as its own
// text, once); other tool calls are one line each, their arguments, result and id folded
// away in a <details>.
import { argumentList, brief, fillArguments } from "./args.js";
import { el, prettyJSON } from "./dom.js";

const UNNAMED = "Agent"; // the root agent's label until the server says its name

export class Transcript {
  /** @param {HTMLElement} root where the conversation is drawn. */
  constructor(root) {
    this.root = root;
    this.rootName = UNNAMED;
    this.rootNamed = false;
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

  agentNode({ name, depth, runId, description }) {
    const body = el("div", { class: "agent-body" });
    const status = el("span", { class: "agent-status" });
    const toggle = el("button", {
      class: "agent-toggle", type: "button", "aria-expanded": "true",
      onclick: () => {
        const open = toggle.getAttribute("aria-expanded") !== "true";
        toggle.setAttribute("aria-expanded", String(open));
        body.hidden = !open;
      },
    }, el("span", { class: "caret", "aria-hidden": "true" }), el("span", { class: "agent-name" }, name));
    const call = description ? el("span", { class: "agent-call", title: description }, description) : null;
    const section = el("section", {
      class: "agent", "data-agent": name, "data-depth": depth, "data-run": runId,
      "aria-label": description ? `Agent ${name}: ${description}` : `Agent ${name}`,
    }, el("header", { class: "agent-head" }, toggle, call, status), body);
    return { section, body, status, depth, name, toggle, description: description || "" };
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
    const node = this.agentNode({ name: this.rootName, depth: 0, runId });
    node.section.classList.add("root-agent");
    this.root.append(node.section);
    this.run = node;
    this.roots.push(node);
    setStatus(node, "working");
  }

  textFor(event) {
    let text = this.messages.get(event.messageId);
    if (!text) {
      const owner = this.ownerOf(event);
      text = el("p", { class: "agent-text", "data-message": event.messageId });
      owner.body.append(text);
      this.messages.set(event.messageId, text);
    }
    return text;
  }

  toolFor(event) {
    let call = this.tools.get(event.toolCallId);
    if (!call) {
      const owner = this.ownerOf(event);
      const name = event.toolCallName || "tool";
      const args = argumentList({}, `Arguments of ${name}`);
      const result = el("pre", { class: "tool-result", "aria-label": `Result of ${name}`, hidden: true });
      const outcome = el("span", { class: "tool-brief" });
      const waiting = el("span", { class: "tool-waiting" });
      const nested = el("div", { class: "tool-nested" });
      const details = el("details", { class: "tool-details" },
        el("summary", { class: "tool-head" }, el("span", { class: "tool-icon", "aria-hidden": "true" }, "⚙"),
          el("span", { class: "tool-name" }, name), outcome, waiting),
        args, result, el("p", { class: "tool-id" }, "Call id ", el("code", {}, event.toolCallId)));
      const section = el("div", { class: "tool-call", "data-tool": name, "data-tool-call": event.toolCallId },
        details, nested);
      owner.body.append(section);
      call = { section, details, args, result, nested, outcome, waiting, agent: null, argText: "" };
      this.tools.set(event.toolCallId, call);
    }
    return call;
  }
}

function renameNode(node, name) {
  node.name = name;
  node.section.dataset.agent = name;
  const label = node.description ? `Agent ${name}: ${node.description}` : `Agent ${name}`;
  node.section.setAttribute("aria-label", label);
  node.toggle.querySelector(".agent-name").textContent = name;
}

/** Whether agent `node` already said `content` in its own words (its answer, streamed). */
function said(node, content) {
  const words = Array.from(node.body.children)
    .filter((child) => child.classList.contains("agent-text"))
    .map((child) => child.textContent).join("\n");
  return words.trim().includes(content.trim());
}

function setStatus(node, status, detail) {
  node.section.dataset.status = status;
  node.status.textContent = detail ? `${status}: ${detail}` : status;
}

const HANDLERS = {
  RUN_STARTED(event) {
    this.startRun(event);
  },
  RUN_FINISHED(event) {
    if (!this.run) return;
    const interrupted = event.outcome && event.outcome.type === "interrupt";
    setStatus(this.run, interrupted ? "waiting for answers" : "done");
  },
  RUN_ERROR(event) {
    if (!this.run) this.startRun({ runId: "" });
    setStatus(this.run, "error", event.message);
    this.run.body.append(el("p", { class: "run-error", role: "alert" }, `Error: ${event.message}`));
  },
  TEXT_MESSAGE_START(event) {
    this.textFor(event);
  },
  TEXT_MESSAGE_CONTENT(event) {
    this.textFor(event).append(document.createTextNode(event.delta));
  },
  TEXT_MESSAGE_CHUNK(event) {
    if (event.messageId && event.delta) this.textFor(event).append(document.createTextNode(event.delta));
  },
  TEXT_MESSAGE_END(event) {
    this.textFor(event).classList.add("complete");
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
  },
  TOOL_CALL_RESULT(event) {
    const call = this.toolFor(event);
    const content = typeof event.content === "string" ? event.content : prettyJSON(event.content);
    call.section.classList.add("done");
    if (call.agent) {
      // An agent's answer is its own last words: shown once, in its node.
      if (!said(call.agent, content)) {
        call.agent.body.append(el("p", { class: "agent-text agent-answer" }, content));
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
  },
  SUBAGENT_FINISHED(event) {
    const node = this.agents.get(event.subagentRunId);
    if (!node) return;
    const suspended = event.outcome && event.outcome.type === "suspended";
    setStatus(node, suspended ? "waiting for answers" : "done");
  },
  SUBAGENT_ERROR(event) {
    const node = this.agents.get(event.subagentRunId);
    if (node) setStatus(node, "error", event.message);
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
