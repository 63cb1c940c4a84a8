// The HTTP side of the page: the routes of hpd_agent's AG-UI endpoint (docs/web.md).

/** An HTTP answer other than 2xx, with the server's `error` text when it sent one. */
export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export class Api {
  /** @param {() => string | null} getToken where the bearer token comes from (may be null). */
  constructor(getToken) {
    this.getToken = getToken;
  }

  headers(extra = {}) {
    const headers = { ...extra };
    const token = this.getToken();
    if (token) headers.Authorization = `Bearer ${token}`;
    return headers;
  }

  async fetch(path, init = {}) {
    const response = await fetch(path, { ...init, headers: this.headers(init.headers) });
    if (!response.ok) {
      let message = `${response.status} ${response.statusText}`;
      try {
        const body = await response.json();
        if (body && typeof body.error === "string") message = body.error;
      } catch {
        // not JSON: keep the status line
      }
      throw new ApiError(response.status, message);
    }
    return response;
  }

  /** Starts a run (POST /agent); returns the SSE response. */
  startRun(input, signal) {
    return this.fetch("agent", {
      method: "POST",
      body: JSON.stringify(input),
      headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
      signal,
    });
  }

  /** The thread's recorded events from index `from`, then live ones until its run ends. */
  events(threadId, from, signal) {
    return this.fetch(`threads/${encodeURIComponent(threadId)}/events?from=${from}`, {
      headers: { Accept: "text/event-stream" },
      signal,
    });
  }

  async pendingRequests(threadId) {
    const response = await this.fetch(`threads/${encodeURIComponent(threadId)}/requests`);
    const body = await response.json();
    return Array.isArray(body.requests) ? body.requests : [];
  }

  /** Answers request `requestId` of the thread (POST {"answer": ...}). */
  answer(threadId, requestId, answer) {
    return this.reply(threadId, requestId, { answer });
  }

  /** Declines it: the person will not answer; the asking tool is told so. */
  decline(threadId, requestId) {
    return this.reply(threadId, requestId, { decline: true });
  }

  async reply(threadId, requestId, body) {
    const path = `threads/${encodeURIComponent(threadId)}/requests/${encodeURIComponent(requestId)}`;
    const response = await this.fetch(path, {
      method: "POST",
      body: JSON.stringify(body),
      headers: { "Content-Type": "application/json" },
    });
    return response.json();
  }
}
