// Requests from dashboard pages to the site's own URLs: the session cookie
// goes along, unsafe methods carry the CSRF token, and a refused request
// becomes a RequestError whose message is fit to show on the page (the
// API answers errors as {"detail": ..., "code": ...}).

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

export class RequestError extends Error {
  constructor(message, { status = 0, code = "" } = {}) {
    super(message);
    this.name = "RequestError";
    this.status = status;
    this.code = code;
  }
}

// Django's csrftoken cookie: always the current token, even after a login
// in another tab rotated it (a token rendered into the page would be stale).
export function csrfToken() {
  const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
  return match ? decodeURIComponent(match[1]) : "";
}

async function refusal(response) {
  const type = response.headers.get("Content-Type") || "";
  if (type.includes("application/json")) {
    const body = await response.json().catch(() => null);
    if (body && typeof body.detail === "string" && body.detail) {
      return new RequestError(body.detail, { status: response.status, code: body.code || "" });
    }
  }
  const reason = response.statusText ? ` ${response.statusText}` : "";
  return new RequestError(`The server refused the request (HTTP ${response.status}${reason}).`, {
    status: response.status,
  });
}

// fetch() for the site: `json` is sent as a JSON body; resolves to the
// Response when it is ok, else rejects with a RequestError.
export async function request(url, { method = "GET", json, body, headers = {} } = {}) {
  const verb = method.toUpperCase();
  const sent = { ...headers };
  if (!SAFE_METHODS.has(verb)) sent["X-CSRFToken"] = csrfToken();
  if (json !== undefined) {
    sent["Content-Type"] = "application/json";
    body = JSON.stringify(json);
  }
  let response;
  try {
    response = await fetch(url, { method: verb, body, headers: sent, credentials: "same-origin" });
  } catch {
    throw new RequestError("Could not reach the server; check the connection and try again.");
  }
  if (!response.ok) throw await refusal(response);
  return response;
}

export async function requestJson(url, options) {
  return (await request(url, options)).json();
}

export async function requestText(url, options) {
  return (await request(url, options)).text();
}

// Shows an error's message in `box` (hidden when there is none).
export function showError(box, error) {
  const message = error ? error.message || String(error) : "";
  box.textContent = message;
  box.hidden = !message;
}
