// The store's inbox (hpd-agent inbox): every question waiting in the store, whichever
// process or surface started its run, grouped by run, the run with the newest question
// first. Each question is the web page's own card (inbox.js: kinds, permission arguments,
// decline, the expiry countdown); answers go to POST inbox/requests/{id}. Live: the page
// listens to GET inbox/events first, and lists the requests (GET inbox/requests) once the
// server says it listens ("ready"), so nothing that happens in between is missed; a change
// it hears for a request it lists already changes nothing twice. When the stream is lost
// (or the server says "resync"), it listens and lists again. Below the runs, the requests
// that ended while the inbox listened, newest first: what was asked, how it ended, who
// answered it, on which channel and when (GET inbox/resolved, then request_resolved).
import { Api, ApiError } from "./api.js";
import { el } from "./dom.js";
import { Inbox } from "./inbox.js";
import { readSSE } from "./sse.js";

const TOKEN_KEY = "hpd_agent.token";
const RETRY_MS = 1000;
const ENDED_SHOWN = 20;
const ANSWER_CHARS = 200;
const STATUS_WORDS = { answered: "Answered", declined: "Declined", expired: "Expired", cancelled: "Cancelled" };

function hashParams() {
  return new URLSearchParams(location.hash.replace(/^#/, ""));
}

/** The filters the page was opened with (#path=A > B&kind=permission), as a query. */
function filterQuery() {
  const wanted = new URLSearchParams();
  for (const key of ["path", "kind"]) {
    const value = hashParams().get(key);
    if (value) wanted.set(key, value);
  }
  const text = wanted.toString();
  return text ? `?${text}` : "";
}

/** A listed request (the API's words) as a card reads it (the web page's words). */
export function cardOf(item) {
  return {
    id: item.request_id,
    kind: item.question_kind,
    agentPath: item.agent_path,
    question: item.question,
    options: item.options,
    responseSchema: item.schema,
    toolName: item.tool_name,
    arguments: item.arguments,
    expiresAt: typeof item.expires_at === "number" ? new Date(item.expires_at * 1000).toISOString() : null,
    label: item.label,
    context: item.context,
    data: item.data,
  };
}

/** An answer as a line of text: a permission's decision in words, else its JSON. */
export function answerText(answer) {
  if (answer && typeof answer === "object" && typeof answer.kind === "string") {
    if (answer.kind === "approve") return answer.scope && answer.scope !== "once" ? `approved (${answer.scope})` : "approved";
    if (answer.kind === "deny") return answer.reason ? `denied: ${answer.reason}` : "denied";
  }
  const text = typeof answer === "string" ? answer : JSON.stringify(answer);
  return text.length > ANSWER_CHARS ? `${text.slice(0, ANSWER_CHARS)}…` : text;
}

/** One ended request as the "Recently resolved" list shows it. */
function endedItem(item) {
  const status = STATUS_WORDS[item.status] || String(item.status);
  const when = typeof item.answered_at === "number" ? new Date(item.answered_at * 1000) : null;
  const who = item.answered_by ? ` by ${item.answered_by}` : "";
  const via = item.channel ? ` via ${item.channel}` : "";
  const path = Array.isArray(item.agent_path) ? item.agent_path.join(" > ") : "";
  return el("li", { class: "ended-item", "data-request": item.request_id, "data-status": item.status },
    el("p", { class: "ended-question" }, String(item.question ?? "")),
    el("p", { class: "ended-outcome" },
      el("strong", {}, status),
      item.status === "answered" ? `: ${answerText(item.answer)}` : "",
      who, via,
      when ? el("time", { datetime: when.toISOString() }, ` at ${when.toLocaleTimeString()}`) : ""),
    el("p", { class: "ended-where" }, [item.run_label, path].filter(Boolean).join(" · ")));
}

/** One run's questions: its section, its cards (an Inbox) and when it last asked. */
class RunGroup {
  constructor(label, board) {
    this.label = label;
    this.activity = 0;
    const counter = el("p", { class: "count" });
    const list = el("div", { class: "questions" });
    const title = el("h3", {}, label);
    this.section = el("section", { class: "run", "aria-label": `Run ${label}`, "data-run": label },
      el("header", { class: "run-head" }, title, counter), list);
    this.inbox = new Inbox(list, counter,
      (request, answer) => board.reply(request, { answer }),
      (request) => board.reply(request, { decline: true }));
    this.inbox.revealing = false; // live cards arrive anywhere: the person's place stays
    this.inbox.onChange = (n) => board.changed(this, n);
  }
}

class Board {
  constructor() {
    this.runs = document.getElementById("runs");
    this.summary = document.getElementById("summary");
    this.live = document.getElementById("live");
    this.empty = document.getElementById("empty");
    this.ended = document.getElementById("ended");
    this.groups = new Map(); // run label -> RunGroup
    this.api = new Api(() => hashParams().get("token") || sessionStorage.getItem(TOKEN_KEY));
    this.query = filterQuery();
    const shown = ["path", "kind"].map((k) => [k, hashParams().get(k)]).filter(([, v]) => v);
    if (shown.length) {
      const filter = document.getElementById("filter");
      filter.textContent = `Showing ${shown.map(([k, v]) => `${k} ${v}`).join(", ")}`;
      filter.hidden = false;
    }
  }

  /** Runs `request`, asking for the token once when the server says 401. */
  async call(request) {
    try {
      return await request();
    } catch (error) {
      if (!(error instanceof ApiError) || error.status !== 401) throw error;
      const token = window.prompt("This inbox needs a token (hpd-agent inbox --token):");
      if (!token) throw error;
      sessionStorage.setItem(TOKEN_KEY, token.trim());
      return request();
    }
  }

  /** Listens for changes, then lists; again whenever the stream ends (not without a
   * token the server takes: the page waits for one in its address). */
  async start() {
    window.addEventListener("hashchange", () => location.reload());
    for (;;) {
      try {
        await this.listen();
        this.setLive("connecting", "Reconnecting…");
      } catch (error) {
        if (error instanceof ApiError && error.status === 401) {
          this.setLive("lost", "Needs a token: open the page with #token=…");
          return;
        }
        this.setLive("lost", `Connection lost: ${error.message}`);
      }
      await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
    }
  }

  async listen() {
    const response = await this.call(() => this.api.fetch(`inbox/events${this.query}`, {
      headers: { Accept: "text/event-stream" },
    }));
    for await (const message of readSSE(response)) {
      if (message.event === "ready") {
        await this.load();
        this.setLive("live", "Live");
      } else if (message.event === "request_opened") {
        this.add(message.data);
        this.sort();
      } else if (message.event === "request_resolved") {
        this.remove(message.data.request_id);
        this.showEnded([message.data]);
      } else if (message.event === "resync") {
        return;
      }
    }
  }

  /** Lists every waiting request: what the listing lacks was answered meanwhile. */
  async load() {
    const response = await this.call(() => this.api.fetch(`inbox/requests${this.query}`));
    const body = await response.json();
    const items = Array.isArray(body.requests) ? body.requests : [];
    const listed = new Set(items.map((item) => item.request_id));
    for (const group of [...this.groups.values()]) {
      for (const id of [...group.inbox.cards.keys()]) if (!listed.has(id)) group.inbox.remove(id);
    }
    for (const item of items) this.add(item);
    this.sort();
    this.count();
    const ended = await this.call(() => this.api.fetch(`inbox/resolved${this.query}`));
    const endedBody = await ended.json();
    this.ended.replaceChildren();
    this.showEnded(Array.isArray(endedBody.resolved) ? [...endedBody.resolved].reverse() : []);
  }

  /** Ended requests (oldest first) go to the top of the list; the newest few are kept. */
  showEnded(items) {
    for (const item of items) {
      if (!item || typeof item.request_id !== "string") continue;
      this.ended.querySelector(`li[data-request="${CSS.escape(item.request_id)}"]`)?.remove();
      this.ended.prepend(endedItem(item));
    }
    while (this.ended.children.length > ENDED_SHOWN) this.ended.lastElementChild.remove();
    this.ended.parentElement.hidden = this.ended.children.length === 0;
  }

  add(item) {
    if (!item || typeof item.request_id !== "string") return;
    const label = String(item.run_label || "Run");
    let group = this.groups.get(label);
    if (!group) {
      group = new RunGroup(label, this);
      this.groups.set(label, group);
      this.runs.append(group.section);
    }
    group.activity = Math.max(group.activity, Number(item.created_at) || 0);
    group.inbox.add(cardOf(item));
  }

  /** A request that ended (answered elsewhere, declined, expired, cancelled) leaves. */
  remove(id) {
    for (const group of this.groups.values()) if (group.inbox.remove(id)) return;
  }

  /** The runs in order of their newest question, newest first (moved only when needed). */
  sort() {
    const order = [...this.groups.values()].sort((a, b) => b.activity - a.activity);
    order.forEach((group, i) => {
      if (this.runs.children[i] !== group.section) this.runs.insertBefore(group.section, this.runs.children[i] || null);
    });
  }

  /** A group's card count changed: a run with nothing left to answer leaves the page. */
  changed(group, n) {
    if (n === 0 && this.groups.get(group.label) === group) {
      this.groups.delete(group.label);
      group.section.remove();
    }
    this.count();
  }

  count() {
    let questions = 0;
    for (const group of this.groups.values()) questions += group.inbox.cards.size;
    const runs = this.groups.size;
    this.summary.textContent = questions === 0 ? "No questions waiting"
      : `${questions} question${questions === 1 ? "" : "s"} waiting in ${runs} run${runs === 1 ? "" : "s"}`;
    this.empty.hidden = questions !== 0;
  }

  setLive(state, text) {
    this.live.dataset.state = state;
    this.live.textContent = text;
  }

  /** Posts an answer or a decline; the card reads the refusal from the error. */
  async reply(request, body) {
    const path = `inbox/requests/${encodeURIComponent(request.id)}`;
    const response = await this.call(() => this.api.fetch(path, {
      method: "POST",
      body: JSON.stringify(body),
      headers: { "Content-Type": "application/json" },
    }));
    return response.json();
  }
}

new Board().start();
