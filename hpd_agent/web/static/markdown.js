// Agent text as people read it: markdown (headings, lists, tables, code) drawn safely.
// marked (vendor/marked.umd.js) turns the text into HTML in which any HTML the text carries
// is escaped, so a model's <script> or <img onerror> is shown as the characters it wrote;
// DOMPurify (vendor/purify.min.js) then keeps only the tags and attributes listed here, and
// its hook keeps a link only when it goes to an absolute http(s) address, opening it in a
// new tab without telling it where it came from. The result comes back as DOM nodes: no
// string of markup is ever assigned to innerHTML. Without the two libraries (a page served
// without its vendor folder) the text is shown as plain text.
import { el } from "./dom.js";

const TAGS = [
  "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "del", "code", "pre",
  "blockquote", "ul", "ol", "li", "a", "table", "thead", "tbody", "tr", "th", "td", "span",
];
const ATTRIBUTES = ["href", "title", "align", "start"];
const CONFIG = {
  ALLOWED_TAGS: TAGS, ALLOWED_ATTR: ATTRIBUTES, ALLOW_DATA_ATTR: false, ALLOW_ARIA_ATTR: false,
  RETURN_DOM_FRAGMENT: true,
};

function escapeHTML(text) {
  return String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** An absolute http(s) address, normalised, or null. */
export function webAddress(href) {
  let parsed;
  try {
    parsed = new URL(href);
  } catch {
    return null;
  }
  return parsed.protocol === "https:" || parsed.protocol === "http:" ? parsed.href : null;
}

function makeParser() {
  const { marked } = globalThis;
  if (!marked || typeof marked.Marked !== "function") return null;
  const parser = new marked.Marked({ gfm: true, breaks: true, async: false });
  parser.use({
    renderer: {
      // HTML in the text is text: shown as written, never parsed.
      html: ({ text }) => escapeHTML(text),
      // An image would load whatever address a model names (and tell it who reads): a link.
      image: ({ href, text }) => `<a href="${escapeHTML(href)}">${escapeHTML(text || href)}</a>`,
      checkbox: ({ checked }) => `<span aria-hidden="true">${checked ? "☑" : "☐"}</span> `,
    },
  });
  return parser;
}

function makePurifier() {
  const { DOMPurify } = globalThis;
  if (typeof DOMPurify !== "function") return null;
  const purifier = DOMPurify(window); // an instance of our own: its hook is ours alone
  if (!purifier.isSupported) return null;
  purifier.addHook("afterSanitizeAttributes", (node) => {
    if (node.nodeName !== "A") return;
    const href = webAddress(node.getAttribute("href") || "");
    if (!href) {
      node.removeAttribute("href"); // a javascript:, data: or relative link is text
      return;
    }
    node.setAttribute("href", href);
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  });
  return purifier;
}

let tools; // {parser, purifier} once the libraries are there, made on first use

function libraries() {
  if (tools === undefined) {
    const parser = makeParser();
    const purifier = makePurifier();
    tools = parser && purifier ? { parser, purifier } : null;
  }
  return tools;
}

/** A button that copies `pre`'s code (where the page may use the clipboard). */
function copyButton(pre) {
  if (!navigator.clipboard) return null;
  const button = el("button", {
    type: "button", class: "copy-code", "aria-label": "Copy code",
    onclick: () => navigator.clipboard.writeText(pre.textContent).then(
      () => { button.textContent = "Copied"; }, () => { button.textContent = "Not copied"; }),
  }, "Copy");
  return button;
}

/** Wide tables and code scroll inside their own box, not the page; code can be copied. */
function wrapWide(fragment) {
  for (const table of fragment.querySelectorAll("table")) {
    const box = el("div", { class: "table-wrap" });
    table.replaceWith(box);
    box.append(table);
  }
  for (const pre of fragment.querySelectorAll("pre")) {
    const box = el("div", { class: "code-block" });
    pre.replaceWith(box);
    const copy = copyButton(pre);
    if (copy) box.append(copy);
    box.append(pre);
  }
  return fragment;
}

/** Replaces what `target` shows with markdown `text` (a block: paragraphs, lists, tables). */
export function renderMarkdown(target, text) {
  const lib = libraries();
  if (!lib) {
    target.textContent = text;
    target.classList.add("plain");
    return;
  }
  const html = lib.parser.parse(String(text));
  target.replaceChildren(wrapWide(lib.purifier.sanitize(html, CONFIG)));
}

/** Replaces what `target` shows with markdown `text` on one line (emphasis, code, links). */
export function renderInline(target, text) {
  const lib = libraries();
  if (!lib) {
    target.textContent = text;
    return;
  }
  const html = lib.parser.parseInline(String(text));
  target.replaceChildren(lib.purifier.sanitize(html, CONFIG));
}
