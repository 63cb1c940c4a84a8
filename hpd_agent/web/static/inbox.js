// The question inbox: every pending request of the thread, from any depth, each with the
// control its kind needs. Answers go out in whatever order the person picks. A card names
// the agent call that asks (its path and its query), so two parallel calls of one agent
// asking at once are told apart; its answer goes to that call's request id. Each card says
// what kind of answer it wants; a permission names its tool and lists the arguments once.
// Every question but a permission (whose Deny already refuses) can also be declined: the
// person will not answer, and the asking tool is told so (QuestionNotAnswered "declined").
// A question asked with a timeout counts down to its expiry on its card (one timer for the
// whole inbox, running while such a card is listed), marked once the run warns it expires.
import { argumentList } from "./args.js";
import { el, prettyJSON, uid } from "./dom.js";
import { renderInline, renderMarkdown } from "./markdown.js";
import { customAnswerEditor } from "./schemaform.js";

export class Inbox {
  /**
   * @param {HTMLElement} list where the cards go.
   * @param {HTMLElement} counter shows how many questions wait.
   * @param {(request: object, answer: any) => Promise<void>} send posts an answer.
   * @param {(request: object) => Promise<void>} decline posts a decline.
   */
  constructor(list, counter, send, decline) {
    this.list = list;
    this.counter = counter;
    this.send = send;
    this.decline = decline;
    this.cards = new Map();
    this.callLabel = () => ""; // subagentRunId -> the call's label, when the tree knows it
    this.ticking = null; // the countdowns' interval, while a card has one
    this.revealing = true; // a new card is scrolled into view (the store's inbox: not)
    this.update();
  }

  /** Marks the card of request `id` as expiring soon (the run's request_expiring). */
  expiring(id) {
    this.cards.get(id)?.classList.add("expiring");
  }

  /** Redraws every countdown; the timer stops once no card has one. */
  tick() {
    const counters = this.list.querySelectorAll(".expires[data-expires]");
    for (const counter of counters) showCountdown(counter, Date.now());
    if (counters.length === 0 && this.ticking !== null) {
      clearInterval(this.ticking);
      this.ticking = null;
    }
  }

  /** Names agent call `subagentRunId` on its cards (learnt after they were listed). */
  labelCall(subagentRunId, label) {
    for (const card of this.cards.values()) {
      if (card.dataset.subagent === subagentRunId) card.querySelector(".agent-call").textContent = label;
    }
  }

  clear() {
    this.cards.clear();
    this.list.replaceChildren();
    this.update();
  }

  has(id) {
    return this.cards.has(id);
  }

  /** Adds a pending request (once: a request listed twice keeps its first card). */
  add(request) {
    if (!request || !request.id || this.cards.has(request.id)) return false;
    const card = buildCard(request, this.callLabel(request.subagentRunId),
      (answer, error) => this.submit(request, () => this.send(request, answer), error),
      (error) => this.submit(request, () => this.decline(request), error));
    this.cards.set(request.id, card);
    this.list.append(card);
    if (card.querySelector(".expires[data-expires]") && this.ticking === null) {
      this.ticking = setInterval(() => this.tick(), 1000);
    }
    this.update();
    if (this.revealing) reveal(card);
    return true;
  }

  remove(id) {
    const card = this.cards.get(id);
    if (!card) return false;
    card.remove();
    this.cards.delete(id);
    this.update();
    return true;
  }

  /** Posts the card's answer or decline (`post`); either ends the card the same way. */
  async submit(request, post, error) {
    const card = this.cards.get(request.id);
    if (!card) return;
    error.textContent = "";
    card.setAttribute("aria-busy", "true");
    for (const control of card.querySelectorAll("button, input, textarea, select")) control.disabled = true;
    try {
      await post();
      this.remove(request.id);
    } catch (failure) {
      card.removeAttribute("aria-busy");
      if (failure.status === 409 || failure.status === 404) {
        // Answered elsewhere, expired or cancelled: nothing left to answer here.
        error.textContent = `Not answered: ${failure.message}`;
        card.classList.add("closed");
        return;
      }
      for (const control of card.querySelectorAll("button, input, textarea, select")) control.disabled = false;
      error.textContent = failure.message;
    }
  }

  /** Brings the first waiting card into view and puts the focus on its first control. */
  focusFirst() {
    const card = this.cards.values().next().value;
    if (!card) return;
    card.scrollIntoView({ block: "nearest" });
    const control = card.querySelector("button:not(:disabled), input:not(:disabled), textarea, select");
    (control || card).focus({ preventScroll: true });
  }

  update() {
    const n = this.cards.size;
    this.counter.textContent = n === 0 ? "No questions waiting" : `${n} question${n === 1 ? "" : "s"} waiting`;
    this.list.closest("aside")?.classList.toggle("has-questions", n > 0);
    if (this.onChange) this.onChange(n);
  }
}

/** Brings a new card into view (between the pinned header and composer: the page's scroll
 * padding) unless the person is typing somewhere. */
function reveal(card) {
  const active = document.activeElement;
  const typing = active && (active.tagName === "TEXTAREA" || active.tagName === "INPUT") && active.value;
  if (!typing) card.scrollIntoView({ block: "nearest" });
}

/** "Expires in 4:59" (h:mm:ss past an hour), then "Expired": the time left on `counter`
 * (its data-expires, epoch milliseconds) at `now`. */
export function showCountdown(counter, now) {
  const left = Math.ceil((Number(counter.dataset.expires) - now) / 1000);
  if (left <= 0) {
    counter.textContent = "Expired";
    counter.closest(".question")?.classList.add("expired");
    return;
  }
  const h = Math.floor(left / 3600);
  const m = Math.floor((left % 3600) / 60);
  const sec = String(left % 60).padStart(2, "0");
  counter.textContent = `Expires in ${h ? `${h}:${String(m).padStart(2, "0")}` : m}:${sec}`;
  counter.closest(".question")?.classList.toggle("soon", left <= 60);
}

/** What the card asks for: the label the server sends (`hpd_agent.questions.answer_prompt`,
 * the words the console and `hpd-agent pending` use too); "Question" when a client of its
 * own sends none. */
export function kindLabel(request) {
  return typeof request.label === "string" && request.label ? request.label : "Question";
}

function titleOf(request) {
  // A permission's own text embeds its arguments as JSON: the card lists them instead.
  if (request.kind === "permission") return `Allow ${request.toolName || "this tool"}?`;
  return request.question || "(no question text)";
}

/** An agent path as people read it ("Orchestrator > Coder > Clarifier"). */
export function pathText(path) {
  return Array.isArray(path) ? path.join(" > ") : String(path || "");
}

function buildCard(request, call, submit, decline) {
  const titleId = uid("question");
  const error = el("p", { class: "answer-error", role: "alert" });
  const path = pathText(request.agentPath);
  const answer = (value) => submit(value, error);
  const widget = Object.hasOwn(WIDGETS, request.kind)
    ? WIDGETS[request.kind](request, answer, error)
    : schemaForm(request, answer, error, kindLabel(request));
  // A permission's Deny already refuses it (and a declined permission ends the same way).
  const refuse = request.kind === "permission" ? null : el("div", { class: "decline-row" },
    el("button", {
      type: "button", class: "decline", onclick: () => decline(error),
      title: "Refuse to answer: the agent is told you declined",
    }, "Decline to answer"));
  const expires = request.expiresAt ? new Date(request.expiresAt) : null;
  let countdown = null;
  if (expires && !Number.isNaN(expires.getTime())) {
    countdown = el("p", {
      class: "expires", role: "timer", "data-expires": String(expires.getTime()),
      title: `Expires at ${expires.toLocaleTimeString()}`,
    });
    showCountdown(countdown, Date.now());
  }
  return el("article", {
    class: "question", "data-request": request.id, "data-kind": request.kind, "aria-labelledby": titleId,
    "data-subagent": request.subagentRunId || undefined,
  },
  el("header", { class: "question-head" },
    el("span", { class: "kind" }, kindLabel(request)),
    el("span", { class: "agent-path", title: "Asked by" }, path)),
  el("p", { class: "agent-call", title: "The task of the call that asks" }, call),
  markdown(el("h3", { id: titleId }), titleOf(request), renderInline),
  request.context ? markdown(el("div", { class: "context" }), request.context, renderMarkdown) : null,
  countdown, widget, refuse, error);
}

/** `element` showing `text` drawn as markdown by `render` (markdown.js: sanitized). */
function markdown(element, text, render) {
  render(element, text);
  return element;
}

function textBox(label, rows, onSend, buttonText = "Send answer") {
  const id = uid("answer");
  const box = rows > 1 ? el("textarea", { id, rows: String(rows) }) : el("input", { id, type: "text" });
  const form = el("form", {
    class: "answer-form",
    onsubmit: (e) => {
      e.preventDefault();
      onSend(box.value);
    },
  }, el("label", { for: id }, label), box, el("button", { type: "submit" }, buttonText));
  if (rows > 1) {
    box.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) form.requestSubmit();
    });
  }
  return form;
}

function optionButtons(options, onPick) {
  return el("div", { class: "options", role: "group", "aria-label": "Options" },
    options.map((option) => el("button", { type: "button", onclick: () => onPick(option) }, option)));
}

function multipleChoice(options, onSend) {
  const boxes = options.map((option) => {
    const id = uid("option");
    const input = el("input", { type: "checkbox", id, value: option });
    return { option, input, element: el("div", { class: "field checkbox" }, input, el("label", { for: id }, option)) };
  });
  return el("form", {
    class: "answer-form",
    onsubmit: (e) => {
      e.preventDefault();
      onSend(boxes.filter((b) => b.input.checked).map((b) => b.option));
    },
  }, el("fieldset", {}, el("legend", {}, "Pick any"), boxes.map((b) => b.element)),
  el("button", { type: "submit" }, "Send choice"));
}

function actionLink(request) {
  const data = request.data || {};
  const url = data.url;
  if (typeof url !== "string") return null;
  let parsed;
  try {
    parsed = new URL(url);
  } catch {
    return el("p", {}, url);
  }
  // Only web links become clickable: a javascript: or data: URL from a tool stays text.
  if (parsed.protocol !== "https:" && parsed.protocol !== "http:") return el("p", {}, url);
  return el("p", {}, el("a", { href: parsed.href, target: "_blank", rel: "noopener noreferrer" },
    data.label || parsed.href));
}

/** A form drawn from the answer's JSON Schema (a custom question, or any kind this page
 * does not know), with the payload shown above it when there is one. */
function schemaForm(request, answer, error, label) {
  const details = request.data && request.data.payload;
  const payload = details && (typeof details !== "object" || Object.keys(details).length)
    ? el("pre", { class: "payload", "aria-label": "Details" }, prettyJSON(details)) : null;
  const editor = customAnswerEditor(request.responseSchema, label);
  return el("form", {
    class: "answer-form",
    onsubmit: (e) => {
      e.preventDefault();
      let value;
      try {
        value = editor.read();
      } catch (failure) {
        error.textContent = failure.message;
        return;
      }
      answer(value);
    },
  }, payload, editor.element, el("button", { type: "submit" }, "Send answer"));
}

const WIDGETS = {
  text(request, answer) {
    if (Array.isArray(request.options) && request.options.length) return optionButtons(request.options, answer);
    return textBox("Your answer", 3, answer);
  },
  input(request, answer) {
    const argument = request.data && request.data.argument;
    return textBox(argument ? `Value for ${argument}` : "Value", 1, answer);
  },
  choice(request, answer) {
    const options = Array.isArray(request.options) ? request.options : [];
    const schema = request.responseSchema || {};
    if (schema.type === "array") return multipleChoice(options, answer);
    return optionButtons(options, answer);
  },
  confirm(request, answer) {
    return el("div", { class: "options", role: "group", "aria-label": "Confirm" },
      el("button", { type: "button", class: "approve", onclick: () => answer(true) }, "Yes"),
      el("button", { type: "button", class: "deny", onclick: () => answer(false) }, "No"));
  },
  action(request, answer) {
    return el("div", {}, actionLink(request),
      el("div", { class: "options", role: "group", "aria-label": "Action" },
        el("button", { type: "button", class: "approve", onclick: () => answer(true) }, "Done"),
        // The action's own "no" (the tool gets False), unlike "Decline to answer".
        el("button", {
          type: "button", class: "deny", onclick: () => answer(false), title: "Answer that you will not do it",
        }, "Decline")));
  },
  custom(request, answer, error) {
    return schemaForm(request, answer, error, "Answer");
  },
  permission(request, answer) {
    const reasonId = uid("reason");
    const reason = el("input", { type: "text", id: reasonId, placeholder: "optional" });
    const args = request.arguments !== undefined && request.arguments !== null
      ? argumentList(request.arguments, `Arguments of ${request.toolName || "the tool"}`) : null;
    return el("div", { class: "permission" }, args,
      el("div", { class: "options", role: "group", "aria-label": "Decision" },
        el("button", { type: "button", class: "approve", onclick: () => answer({ kind: "approve", scope: "once" }) }, "Approve once"),
        el("button", { type: "button", class: "approve", onclick: () => answer({ kind: "approve", scope: "run" }) }, "Approve for this run"),
        // A grant kept in the server's store: later calls of the tool by this agent, in any
        // run, are approved without asking until it is revoked (hpd-agent grants revoke).
        // Quieter than the two approvals: it outlives the run.
        el("button", {
          type: "button", class: "quiet", onclick: () => answer({ kind: "approve", scope: "always" }),
          title: "Remember: approve this tool for this agent from now on, in every run (hpd-agent grants revoke ID undoes it)",
        }, "Always approve")),
      el("form", {
        class: "deny-form",
        onsubmit: (e) => {
          e.preventDefault();
          const why = reason.value.trim();
          answer(why ? { kind: "deny", reason: why } : { kind: "deny" });
        },
      }, el("label", { for: reasonId }, "Reason for denying"), reason,
      el("button", { type: "submit", class: "deny" }, "Deny")));
  },
};
