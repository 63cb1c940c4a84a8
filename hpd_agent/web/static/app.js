// The page: a chat with an hpd_agent tree over AG-UI, in live mode (the run stays open while
// questions wait; answers go to POST /threads/{t}/requests/{id}). Reloading the page rebuilds
// everything from the server: GET /threads/{t}/requests and /threads/{t}/events?from=0.
import { Api, ApiError } from "./api.js";
import { Follower } from "./follow.js";
import { Inbox } from "./inbox.js";
import { readSSE } from "./sse.js";
import { Transcript, callLabel, markAsking } from "./view.js";
import { Welcome, growWithText, showDescription } from "./welcome.js";

const THREAD_KEY = "hpd_agent.thread";
const TOKEN_KEY = "hpd_agent.token";
const TERMINAL = new Set(["RUN_FINISHED", "RUN_ERROR"]);

function randomId(prefix) {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return prefix + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function hashParams() {
  return new URLSearchParams(location.hash.replace(/^#/, ""));
}

function setHashThread(threadId) {
  const params = hashParams();
  params.set("thread", threadId);
  history.replaceState(null, "", `#${params.toString()}`);
}

class App {
  constructor() {
    this.status = document.getElementById("status");
    this.form = document.getElementById("chat");
    this.prompt = document.getElementById("prompt");
    this.sendButton = document.getElementById("send");
    this.threadLabel = document.getElementById("thread-id");
    this.infoWanted = true; // the agent's name is still to be asked for (GET /info)
    this.transcript = new Transcript(document.getElementById("transcript"));
    this.inbox = new Inbox(document.getElementById("questions"), document.getElementById("question-count"),
      (request, answer) => this.answer(request, answer), (request) => this.decline(request));
    this.inbox.onChange = () => this.settledStatus();
    this.inbox.callLabel = (subagentRunId) => callLabel(this.transcript, subagentRunId);
    this.transcript.onActivity = (name) => {
      this.busyWith = name;
      if (this.running) this.settledStatus();
    };
    this.welcome = new Welcome(document.getElementById("welcome"), (text) => {
      this.prompt.value = text;
      this.send();
    });
    this.showQuestions = document.getElementById("show-questions");
    this.showQuestions.addEventListener("click", () => this.inbox.focusFirst());
    this.follower = new Follower({
      watched: [this.transcript.root, this.inbox.list],
      pill: document.getElementById("new-messages"),
      header: document.querySelector("header.top"),
      composer: document.getElementById("composer"),
      onMove: () => this.questionsHint(),
    });
    new MutationObserver(() => this.updateWelcome()).observe(this.transcript.root, { childList: true });
    growWithText(this.prompt);
    this.api = new Api(() => hashParams().get("token") || sessionStorage.getItem(TOKEN_KEY));
    this.history = []; // the thread's messages, sent with the next prompt
    this.asking = new Map(); // request id -> request, for the agents marked as waiting
    this.running = false;
    this.loading = true; // a known conversation is being fetched: no welcome yet
    this.busyWith = null; // the name of the agent at work
    this.lastId = -1; // index of the last thread event seen (SSE id)
    this.abort = null;

    this.form.addEventListener("submit", (e) => {
      e.preventDefault();
      this.send();
    });
    this.prompt.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        this.form.requestSubmit();
      }
    });
    document.getElementById("new-thread").addEventListener("click", () => this.open(randomId("thread-"), true));
    document.getElementById("copy-thread").addEventListener("click", (e) => {
      navigator.clipboard?.writeText(this.threadId).then(() => { e.target.textContent = "Copied"; }, () => {});
    });
    window.addEventListener("hashchange", () => {
      const wanted = hashParams().get("thread");
      if (wanted && wanted !== this.threadId) this.open(wanted, false);
    });
  }

  start() {
    this.loadInfo();
    const threadId = hashParams().get("thread") || localStorage.getItem(THREAD_KEY);
    if (threadId) this.open(threadId, false);
    else this.open(randomId("thread-"), true);
  }

  /** Shows thread `threadId`: a new one is empty; a known one is rebuilt from the server. */
  async open(threadId, fresh) {
    if (this.abort) this.abort.abort();
    this.abort = new AbortController();
    this.threadId = threadId;
    localStorage.setItem(THREAD_KEY, threadId);
    setHashThread(threadId);
    this.threadLabel.textContent = threadId;
    document.getElementById("copy-thread").textContent = "Copy";
    this.transcript.reset();
    this.inbox.clear();
    this.history = [];
    this.asking.clear();
    this.lastId = -1;
    this.setRunning(false);
    this.follower.follow();
    this.loading = !fresh;
    this.updateWelcome();
    if (fresh) {
      this.setStatus("Ready");
      return;
    }
    const signal = this.abort.signal;
    await this.restore(signal);
    if (signal.aborted) return; // another conversation was opened meanwhile
    this.loading = false;
    this.updateWelcome();
  }

  /** The welcome (the agent, its suggested prompts) while the conversation is empty. */
  updateWelcome() {
    this.welcome.show(!this.loading && this.transcript.root.childElementCount === 0);
  }

  /** On a phone the questions sit under the conversation: when they wait out of sight, a
   * button above the composer says so and brings the first one into view. */
  questionsHint() {
    const waiting = this.inbox.cards.size;
    const box = this.inbox.list.closest("aside").getBoundingClientRect();
    const top = document.querySelector("header.top").getBoundingClientRect().bottom;
    const bottom = document.getElementById("composer").getBoundingClientRect().top;
    const seen = box.bottom > top && box.top < bottom && box.height > 0;
    this.showQuestions.hidden = !waiting || seen;
    const label = `${waiting} question${waiting === 1 ? "" : "s"} waiting`;
    if (this.showQuestions.textContent !== label) this.showQuestions.textContent = label;
  }

  async restore(signal) {
    this.setStatus("Loading the conversation…");
    try {
      const pending = await this.call(() => this.api.pendingRequests(this.threadId));
      for (const request of pending) this.inbox.add(request);
      await this.loadMessages();
      await this.follow(0, signal);
    } catch (error) {
      if (signal.aborted) return;
      if (error instanceof ApiError && error.status === 404) {
        // A thread this server does not know (e.g. a new store): start it afresh.
        this.setStatus("Ready");
        return;
      }
      this.setStatus(`Could not load the conversation: ${error.message}`, true);
    }
  }

  async loadMessages() {
    try {
      const response = await this.call(() => this.api.fetch(`threads/${encodeURIComponent(this.threadId)}/messages`));
      const body = await response.json();
      if (Array.isArray(body.messages)) {
        this.history = body.messages;
        this.transcript.queueUserMessages(body.messages);
      }
    } catch (error) {
      if (!(error instanceof ApiError) || error.status !== 404) throw error;
    }
  }

  /** Shows the served agent's name and description (without asking for a token: a server
   * that wants one is asked again after the first call that had it). */
  async loadInfo() {
    this.infoWanted = false;
    let info;
    try {
      info = await (await this.api.fetch("info")).json();
    } catch (error) {
      if (error instanceof ApiError && error.status === 401) this.infoWanted = true;
      return;
    }
    if (!info || typeof info.name !== "string") return;
    document.getElementById("agent-name").textContent = info.name;
    document.title = info.name;
    showDescription(document.getElementById("agent-description"),
      document.getElementById("more-description"), info.description || "");
    this.prompt.placeholder = `Message ${info.name}`;
    this.prompt.dispatchEvent(new Event("input")); // its height, for the new placeholder
    this.welcome.fill(info);
    this.transcript.setRootName(info.name);
  }

  /** Runs `request`, asking for the token once when the server says 401. */
  async call(request) {
    let result;
    try {
      result = await request();
    } catch (error) {
      if (!(error instanceof ApiError) || error.status !== 401) throw error;
      const token = window.prompt("This server needs a token (hpd-agent serve --token):");
      if (!token) throw error;
      sessionStorage.setItem(TOKEN_KEY, token.trim());
      result = await request();
    }
    if (this.infoWanted) this.loadInfo();
    return result;
  }

  async send() {
    const text = this.prompt.value.trim();
    if (!text || this.running) return;
    const message = { id: randomId("msg-"), role: "user", content: text };
    this.prompt.value = "";
    this.prompt.dispatchEvent(new Event("input")); // back to one line
    this.follower.follow();
    this.transcript.addUserMessage(message);
    this.setRunning(true);
    this.settledStatus();
    const input = {
      threadId: this.threadId,
      runId: randomId("run-"),
      messages: [...this.history, message],
      tools: [],
      context: [],
      state: {},
      forwardedProps: { hpd_agent: { mode: "live" } },
    };
    this.history = input.messages;
    const signal = this.abort.signal;
    // Thread indices come as SSE ids on /events; the run's own stream may carry none.
    this.lastId = -1;
    try {
      const response = await this.call(() => this.api.startRun(input, signal));
      const finished = await this.consume(response, signal);
      if (!finished && !signal.aborted) await this.recover(signal);
    } catch (error) {
      if (signal.aborted) return;
      this.setRunning(false);
      this.setStatus(`Error: ${error.message}`, true);
    }
  }

  /**
   * The server owns a live run, so a broken stream loses nothing: continue from the last
   * thread index seen, or (when the stream carried none) rebuild the view from the start.
   */
  async recover(signal) {
    if (this.lastId >= 0) await this.follow(this.lastId + 1, signal);
    else await this.open(this.threadId, false);
  }

  /** Streams the thread's events from index `from` until its current run ends. */
  async follow(from, signal) {
    let start = from;
    for (let attempt = 0; attempt < 5 && !signal.aborted; attempt += 1) {
      const response = await this.call(() => this.api.events(this.threadId, start, signal));
      const before = this.lastId;
      const finished = await this.consume(response, signal);
      if (finished || !this.running) break;
      if (this.lastId === before) attempt += 1; // nothing new: do not spin
      start = this.lastId + 1;
    }
    if (!this.running && this.status.dataset.error !== "true") this.settledStatus();
  }

  /** Feeds an SSE response to the view; true when the run's last event came. */
  async consume(response, signal) {
    let finished = false;
    for await (const message of readSSE(response)) {
      if (signal.aborted) return true;
      if (message.id !== null && /^\d+$/.test(message.id)) this.lastId = Number(message.id);
      this.dispatch(message.data);
      if (TERMINAL.has(message.data.type)) finished = true;
      else if (message.data.type === "RUN_STARTED") finished = false;
    }
    return finished;
  }

  dispatch(event) {
    this.transcript.handle(event);
    switch (event.type) {
      case "RUN_STARTED":
        this.setRunning(true);
        this.settledStatus();
        break;
      case "RUN_FINISHED":
        this.setRunning(false);
        this.settledStatus();
        break;
      case "RUN_ERROR":
        this.setRunning(false);
        this.setStatus(`Error: ${event.message}`, true);
        break;
      case "MESSAGES_SNAPSHOT":
        if (Array.isArray(event.messages)) this.history = event.messages;
        break;
      case "CUSTOM":
        this.custom(event);
        break;
      case "SUBAGENT_STARTED":
        // Cards listed before the tree was rebuilt (a reload) learn which call asks.
        if (event.description) this.inbox.labelCall(event.subagentRunId, event.description);
        break;
      default:
    }
  }

  custom(event) {
    const value = event.value || {};
    if (event.name === "hpd_agent.request") {
      this.inbox.add(value);
      if (!this.asking.has(value.id)) {
        this.asking.set(value.id, value);
        markAsking(this.transcript, value, true);
      }
      this.settledStatus();
    } else if (event.name === "hpd_agent.request_resolved") {
      this.inbox.remove(value.id);
      this.resolved(value.id);
    } else if (event.name === "hpd_agent.request_expiring") {
      this.inbox.expiring(value.id);
    }
  }

  resolved(id) {
    const request = this.asking.get(id);
    if (request) {
      this.asking.delete(id);
      markAsking(this.transcript, request, false);
    }
    this.settledStatus();
  }

  async answer(request, answer) {
    await this.call(() => this.api.answer(this.threadId, request.id, answer));
    this.resolved(request.id);
  }

  /** Declines `request`: it ends like an answered one (the stream's request_resolved event
   * says "declined"). */
  async decline(request) {
    await this.call(() => this.api.decline(this.threadId, request.id));
    this.resolved(request.id);
  }

  settledStatus() {
    const waiting = this.inbox.cards.size;
    if (waiting) this.setStatus(`Waiting for your answer${waiting === 1 ? "" : "s"} (${waiting})`);
    else if (this.running) this.setStatus(`${this.busyWith || this.transcript.rootName} is working`, false, true);
    else this.setStatus(this.transcript.run ? "Done" : "Ready");
    this.questionsHint();
  }

  setRunning(running) {
    this.running = running;
    this.sendButton.disabled = running;
    document.body.dataset.running = String(running);
  }

  /** The line over the composer; `busy` draws the activity dots before it. */
  setStatus(text, isError = false, busy = false) {
    this.status.textContent = text;
    this.status.dataset.error = String(isError);
    this.status.dataset.busy = String(busy);
  }
}

new App().start();
