// A tool call's arguments as a person reads them: one "name: value" line each, long or
// multi-line values cut to a line that opens to the whole value. Never raw JSON, unless the
// arguments are not a JSON object (then the text as sent).
import { el, prettyJSON } from "./dom.js";

const SHORT = 80; // longest value shown whole on its line

/** The arguments `value` (an object, or its JSON text) as a <dl> labelled `label`. */
export function argumentList(value, label) {
  const list = el("dl", { class: "args", "aria-label": label });
  fillArguments(list, value);
  return list;
}

/** Replaces what `list` shows with the arguments `value`. */
export function fillArguments(list, value) {
  const args = parsed(value);
  if (args === undefined) {
    list.replaceChildren(el("div", { class: "arg" }, el("dd", { class: "raw" }, String(value))));
    return;
  }
  const rows = Object.entries(args).map(([name, item]) =>
    el("div", { class: "arg" }, el("dt", {}, name), el("dd", {}, shown(item))));
  list.replaceChildren(...rows);
  list.classList.toggle("empty", rows.length === 0);
}

function parsed(value) {
  let args = value;
  if (typeof value === "string") {
    try {
      args = JSON.parse(value);
    } catch {
      return undefined;
    }
  }
  return args && typeof args === "object" && !Array.isArray(args) ? args : undefined;
}

/** One value: whole when short, else its start, opening to the whole value. */
function shown(item) {
  const full = typeof item === "string" ? item : prettyJSON(item);
  if (full.length <= SHORT && !full.includes("\n")) return full;
  return el("details", { class: "long-value" },
    el("summary", {}, `${brief(full)} (${full.length} characters)`),
    el("pre", {}, full));
}

/** The first line of `text`, cut to a short line. */
export function brief(text, length = 60) {
  const lines = String(text).trim().split("\n");
  if (lines[0].length > length) return `${lines[0].slice(0, length - 1)}…`;
  return lines.length > 1 ? `${lines[0]} …` : lines[0];
}
