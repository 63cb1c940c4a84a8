// Building DOM nodes. Text always goes in as text nodes (never innerHTML), so whatever a
// model or a tool says is shown, never interpreted as markup.

/**
 * el("div", {class: "x", "aria-label": "y"}, child, "text", ...): an element with
 * attributes (on* handlers are attached as listeners) and children (strings become text).
 */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      node.addEventListener(key.slice(2), value);
    } else if (key === "class") {
      node.className = value;
    } else if (value === true) {
      node.setAttribute(key, "");
    } else {
      node.setAttribute(key, String(value));
    }
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

let counter = 0;

/** A document-unique id for label/aria wiring. */
export function uid(prefix) {
  counter += 1;
  return `${prefix}-${counter}`;
}

/** JSON text as a person reads it: pretty-printed when it parses, as sent when not. */
export function prettyJSON(value) {
  if (typeof value === "string") {
    try {
      return JSON.stringify(JSON.parse(value), null, 2);
    } catch {
      return value;
    }
  }
  return JSON.stringify(value, null, 2);
}
