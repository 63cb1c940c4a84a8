// A form for a custom question's JSON schema: objects, strings, numbers, integers, booleans
// and enums get fields; anything else (or a person who prefers it) edits the answer as raw JSON.
import { el, uid } from "./dom.js";

/** Whether `schema` is simple enough to be drawn as fields. */
export function formable(schema, depth = 0) {
  if (!schema || typeof schema !== "object" || depth > 3) return false;
  if (Array.isArray(schema.enum)) return schema.enum.length > 0;
  if (schema.type === "object") {
    const props = schema.properties || {};
    return Object.keys(props).length > 0 && Object.values(props).every((s) => formable(s, depth + 1));
  }
  return ["string", "number", "integer", "boolean"].includes(schema.type);
}

/**
 * Builds fields for `schema`. Returns {element, read}; read() gives the answer value or
 * throws an Error saying which field is wrong.
 */
export function schemaFields(schema, label) {
  if (Array.isArray(schema.enum)) return enumField(schema, label);
  if (schema.type === "object") return objectFields(schema, label);
  if (schema.type === "boolean") return booleanField(schema, label);
  if (schema.type === "number" || schema.type === "integer") return numberField(schema, label);
  return stringField(schema, label);
}

function labelled(labelText, input, schema) {
  const id = uid("field");
  input.id = id;
  const hint = schema.description ? el("small", { class: "hint" }, schema.description) : null;
  return el("div", { class: "field" }, el("label", { for: id }, labelText), input, hint);
}

function stringField(schema, label) {
  const input = el("input", { type: "text", name: label });
  if (schema.default !== undefined) input.value = String(schema.default);
  return {
    element: labelled(label, input, schema),
    read: () => input.value,
    empty: () => input.value === "",
  };
}

function numberField(schema, label) {
  const input = el("input", { type: "number", name: label, step: schema.type === "integer" ? "1" : "any" });
  if (schema.default !== undefined) input.value = String(schema.default);
  return {
    element: labelled(label, input, schema),
    read: () => {
      const value = Number(input.value);
      if (input.value.trim() === "" || !Number.isFinite(value)) throw new Error(`${label}: enter a number`);
      if (schema.type === "integer" && !Number.isInteger(value)) throw new Error(`${label}: enter a whole number`);
      return value;
    },
    empty: () => input.value.trim() === "",
  };
}

function booleanField(schema, label) {
  const input = el("input", { type: "checkbox", name: label });
  input.checked = schema.default === true;
  const id = uid("field");
  input.id = id;
  return {
    element: el("div", { class: "field checkbox" }, input, el("label", { for: id }, label)),
    read: () => input.checked,
    empty: () => false,
  };
}

function enumField(schema, label) {
  const select = el("select", { name: label },
    schema.enum.map((value, i) => el("option", { value: String(i) }, String(value))));
  if (schema.default !== undefined) {
    const index = schema.enum.findIndex((v) => JSON.stringify(v) === JSON.stringify(schema.default));
    if (index >= 0) select.value = String(index);
  }
  return {
    element: labelled(label, select, schema),
    read: () => schema.enum[Number(select.value)],
    empty: () => false,
  };
}

function objectFields(schema, label) {
  const required = new Set(schema.required || []);
  const fields = Object.entries(schema.properties).map(([name, sub]) => {
    const title = sub.title || name;
    return { name, required: required.has(name), ...schemaFields(sub, required.has(name) ? `${title} (required)` : title) };
  });
  const element = el("fieldset", { class: "object-fields" },
    el("legend", {}, schema.title || label), fields.map((f) => f.element));
  return {
    element,
    read: () => {
      const value = {};
      for (const f of fields) {
        if (!f.required && f.empty()) continue;
        value[f.name] = f.read();
      }
      return value;
    },
    empty: () => fields.every((f) => f.empty()),
  };
}

/**
 * The custom-answer editor: schema fields when the schema allows, plus a raw JSON box
 * (the only editor when it does not). Returns {element, read}.
 */
export function customAnswerEditor(schema, questionLabel) {
  const rawId = uid("raw");
  const raw = el("textarea", { id: rawId, rows: "4", class: "raw-json", spellcheck: "false" });
  const rawField = el("div", { class: "field" }, el("label", { for: rawId }, "Answer as JSON"), raw);
  if (!formable(schema)) {
    return { element: rawField, read: () => parseRaw(raw.value) };
  }
  const form = schemaFields(schema, questionLabel);
  rawField.hidden = true;
  const switchId = uid("rawswitch");
  const useRaw = el("input", {
    type: "checkbox", id: switchId,
    onchange: () => {
      if (useRaw.checked) {
        try {
          raw.value = JSON.stringify(form.read(), null, 2);
        } catch {
          raw.value = "";
        }
      }
      form.element.hidden = useRaw.checked;
      rawField.hidden = !useRaw.checked;
    },
  });
  const element = el("div", { class: "custom-answer" }, form.element,
    el("div", { class: "field checkbox" }, useRaw, el("label", { for: switchId }, "Edit as raw JSON")),
    rawField);
  return { element, read: () => (useRaw.checked ? parseRaw(raw.value) : form.read()) };
}

function parseRaw(text) {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new Error(`the answer is not valid JSON: ${error.message}`);
  }
}
