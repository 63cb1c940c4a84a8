// What an empty conversation shows: the served agent, what it does, and the prompts it
// suggests (GET /info's `examples`, from `Agent(examples=[...])` or `serve --example`);
// a click on one sends it. Also the header's description, folded to a line on a phone.
import { el } from "./dom.js";

export class Welcome {
  /**
   * @param {HTMLElement} root the welcome section.
   * @param {(prompt: string) => void} onPick sends a suggested prompt.
   */
  constructor(root, onPick) {
    this.root = root;
    this.onPick = onPick;
  }

  show(visible) {
    this.root.hidden = !visible;
  }

  /** Fills in the agent (GET /info): its name, its description, its suggested prompts. */
  fill({ name, description, examples }) {
    this.root.querySelector("#welcome-title").textContent = name;
    this.root.querySelector("#welcome-avatar").textContent = (Array.from(name.trim())[0] || "A").toUpperCase();
    const about = this.root.querySelector("#welcome-description");
    about.textContent = description || "Send a message to start.";
    const prompts = Array.isArray(examples) ? examples.filter((e) => typeof e === "string" && e) : [];
    this.root.querySelector("#suggestions").replaceChildren(...prompts.map((prompt) =>
      el("button", { type: "button", class: "suggestion", onclick: () => this.onPick(prompt) }, prompt)));
  }
}

/** The message box grows with its text, up to the cap its style sets, then scrolls. */
export function growWithText(box) {
  const fit = () => {
    box.style.height = "auto";
    box.style.height = `${box.scrollHeight + 2}px`;
  };
  box.addEventListener("input", fit);
  fit();
}

/** The header's description: one line when it does not fit, with a button that opens it. */
export function showDescription(text, more, description) {
  text.textContent = description;
  text.hidden = !description;
  const fold = () => {
    const open = more.getAttribute("aria-expanded") === "true";
    const overflows = text.scrollWidth > text.clientWidth + 1 || text.scrollHeight > text.clientHeight + 1;
    more.hidden = !description || (!open && !overflows);
  };
  if (!more.dataset.wired) {
    more.dataset.wired = "true";
    more.addEventListener("click", () => {
      const open = more.getAttribute("aria-expanded") !== "true";
      more.setAttribute("aria-expanded", String(open));
      more.textContent = open ? "Less" : "More";
      text.classList.toggle("open", open);
    });
    new ResizeObserver(fold).observe(text);
  }
  fold();
}
