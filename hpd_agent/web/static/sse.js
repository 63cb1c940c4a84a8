// Reading Server-Sent Events from a fetch() response. EventSource cannot send an
// Authorization header nor POST a body, so the page parses the stream itself.

/**
 * Yields each SSE message of `response` as {id, event, data} (data already JSON-parsed;
 * comments such as `: ping` keep-alives are skipped). Ends when the server closes the stream.
 */
export async function* readSSE(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const message = parseBlock(block);
      if (message) yield message;
    }
  }
  const rest = parseBlock(buffer + decoder.decode());
  if (rest) yield rest;
}

function parseBlock(block) {
  const data = [];
  let id = null;
  let event = "message";
  for (const line of block.split("\n")) {
    if (line === "" || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") data.push(value);
    else if (field === "id") id = value;
    else if (field === "event") event = value;
  }
  if (data.length === 0) return null;
  const text = data.join("\n");
  let parsed;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = { type: "UNPARSEABLE", text };
  }
  return { id, event, data: parsed };
}
