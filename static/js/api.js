// The JSON API client: requests, and error messages a person can act on.

/** An API call that failed; `message` is meant for the user, `status` is the HTTP status. */
export class ApiError extends Error {
  constructor(message, status = 0, detail = null) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.detail = detail;
  }
}

/**
 * Turn FastAPI's `detail` (a string, or pydantic's list of {loc, msg}) into one readable line,
 * naming the field: "beam_size: Input should be less than or equal to 8".
 */
export function errorMessage(detail, status) {
  if (typeof detail === "string" && detail) return detail;
  if (Array.isArray(detail) && detail.length) {
    return detail
      .map((err) => {
        if (typeof err === "string") return err;
        const loc = (err.loc || []).filter((part) => part !== "body").join(".");
        const msg = err.msg || JSON.stringify(err);
        return loc ? `${loc}: ${msg}` : msg;
      })
      .join("; ");
  }
  if (detail && typeof detail === "object") return detail.message || JSON.stringify(detail);
  return status ? `The server answered with HTTP ${status}.` : "The request failed.";
}

async function request(url, options) {
  let res;
  try {
    res = await fetch(url, options);
  } catch (err) {
    if (err.name === "AbortError") throw err;
    throw new ApiError("Could not reach the attnscope server. Is it still running?", 0);
  }
  const text = await res.text();
  let body = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = null;
  }
  if (!res.ok) {
    const detail = body && typeof body === "object" ? body.detail : null;
    throw new ApiError(errorMessage(detail ?? text.slice(0, 300), res.status), res.status, detail);
  }
  if (body === null) throw new ApiError("The server sent a response that is not JSON.", res.status);
  return { body, text };
}

/** GET a JSON resource. */
export async function getJSON(url, { signal } = {}) {
  return (await request(url, { headers: { Accept: "application/json" }, signal })).body;
}

/** POST JSON; returns {body, text} (text is the raw response, kept for downloads). */
export async function postJSON(url, payload, { signal } = {}) {
  return request(url, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json" },
    body: JSON.stringify(payload),
    signal,
  });
}

/**
 * POST /api/translate. `params`: {text, model, beam_size, top_k, max_length, kinds, layers,
 * heads, ...}; the page always asks for the compact encoding. Returns {body, text}.
 */
export function translate(params, { signal } = {}) {
  const payload = { encoding: "compact", ...params };
  for (const key of Object.keys(payload)) if (payload[key] == null) delete payload[key];
  return postJSON("/api/translate", payload, { signal });
}

/** Save `text` as a file through a Blob and a temporary download link. */
export function downloadText(text, filename, type = "application/json") {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = document.createElement("a");
  a.href = url;
  a.download = filename;
  a.hidden = true;
  document.body.append(a);
  a.click();
  a.remove();
  // Revoke later: the download may not have started yet when click() returns.
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** Show `message` in an alert box (role="alert"), or hide the box when there is none. */
export function showError(box, message) {
  box.hidden = !message;
  box.textContent = message ?? "";
}

/** The user-facing text of an error: the server's message, or a note that drawing failed. */
export function errorText(err) {
  if (err instanceof ApiError) return err.message;
  console.warn(err); // a bug, not bad input: keep the stack
  return `Something went wrong while drawing: ${err.message}`;
}

/** Mark a button busy (disabled, spinner) and a region aria-busy; either may be null. */
function markBusy(button, region, busy) {
  if (button) {
    button.disabled = busy;
    button.classList.toggle("is-busy", busy);
  }
  region?.setAttribute("aria-busy", String(busy));
}

/**
 * The latest of a series of requests from one form: starting a run aborts the one before, so an
 * answer that arrives late never overwrites a newer one. `run(work, {button, errorBox, region})`
 * marks the button and region busy, clears the error box, awaits `work(signal, isCurrent)` (which
 * passes `signal` to its fetch and checks `isCurrent()` after each await), shows what went wrong
 * in the box (an aborted run stays silent), and clears the busy marks when the latest run ends.
 */
export class LatestRequest {
  constructor() {
    this.controller = null;
  }

  async run(work, { button = null, errorBox = null, region = null } = {}) {
    this.controller?.abort();
    const controller = new AbortController();
    this.controller = controller;
    const isCurrent = () => this.controller === controller;
    markBusy(button, region, true);
    if (errorBox) showError(errorBox, null);
    try {
      await work(controller.signal, isCurrent);
    } catch (err) {
      if (err.name !== "AbortError" && errorBox && isCurrent()) showError(errorBox, errorText(err));
    } finally {
      if (isCurrent()) {
        this.controller = null;
        markBusy(button, region, false);
      }
    }
  }
}
