// Every call the UI makes goes through here: /api/v2.0 with the session cookie, the CSRF header on changes, and
// Harbor's {"errors":[…]} turned into an ApiError. A 401 from any call opens the sign-in dialog over the current
// page and the call is retried once the user has signed in again, so nothing on the page is lost.
import { signal } from "@preact/signals";

export const API = "/api/v2.0";

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly code = "",
    readonly retryAfter: number | null = null,
  ) {
    super(message);
  }
}

export interface Page<T> {
  items: T[];
  total: number;
}

let csrf = "";
/** Set when a session has expired (or never was) and a call needs one; the App shows the sign-in dialog. */
export const loginNeeded = signal(false);
let waiting: Array<() => void> = [];

/** Called after a successful sign-in: calls that were waiting for it go again. */
export function sessionRestored(token: string) {
  csrf = token;
  loginNeeded.value = false;
  const w = waiting;
  waiting = [];
  w.forEach((f) => f());
}

export function setCsrf(token: string) {
  csrf = token;
}

async function errorOf(r: Response): Promise<ApiError> {
  let msg = r.statusText || `HTTP ${r.status}`;
  let code = "";
  try {
    const j = await r.json();
    if (j && Array.isArray(j.errors) && j.errors[0]) {
      msg = j.errors[0].message || msg;
      code = j.errors[0].code || "";
    }
  } catch {
    /* not JSON */
  }
  const ra = r.headers.get("retry-after");
  return new ApiError(r.status, msg, code, ra != null && ra !== "" ? Number(ra) : null);
}

export interface CallOptions {
  /** do not open the sign-in dialog on 401 (the sign-in page itself, and the first "who am I") */
  quiet401?: boolean;
  body?: unknown;
  /** return error answers instead of throwing (bodies that carry data with an error status, e.g. ISA 409) */
  raw?: boolean;
}

export async function call(method: string, path: string, opts: CallOptions = {}): Promise<Response> {
  const headers: Record<string, string> = { Accept: "application/json" };
  if (method !== "GET" && method !== "HEAD") headers["X-Harbor-CSRF-Token"] = csrf;
  let body: BodyInit | undefined;
  if (opts.body !== undefined) {
    headers["Content-Type"] = "application/json";
    body = JSON.stringify(opts.body);
  }
  const r = await fetch(path.startsWith("/") && !path.startsWith(API) ? API + path : path, {
    method, headers, body, credentials: "same-origin", cache: "no-store",
  });
  const t = r.headers.get("x-harbor-csrf-token");
  if (t) csrf = t;
  if (r.status === 401 && !opts.quiet401) {
    loginNeeded.value = true;
    await new Promise<void>((resolve) => waiting.push(resolve));
    return call(method, path, opts);
  }
  if (!r.ok && !opts.raw) throw await errorOf(r);
  return r;
}

export async function get<T>(path: string, opts: CallOptions = {}): Promise<T> {
  const r = await call("GET", path, opts);
  return (await r.json()) as T;
}

export async function list<T>(path: string): Promise<Page<T>> {
  const r = await call("GET", path);
  const items = ((await r.json()) ?? []) as T[];
  const total = Number(r.headers.get("x-total-count") ?? items.length);
  return { items, total };
}

export async function send(method: string, path: string, body?: unknown): Promise<Response> {
  return call(method, path, { body });
}

/** POST /c/login as a form, like Harbor's portal. Returns the CSRF token. */
export async function login(principal: string, password: string): Promise<{ username: string; csrf_token: string }> {
  const r = await fetch("/c/login", {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded", Accept: "application/json" },
    body: new URLSearchParams({ principal, password }).toString(),
    credentials: "same-origin",
  });
  if (!r.ok) throw await errorOf(r);
  const j = await r.json();
  csrf = j.csrf_token;
  return j;
}

export async function logout(): Promise<void> {
  await fetch("/c/log_out", { method: "POST", headers: { "X-Harbor-CSRF-Token": csrf }, credentials: "same-origin" });
  csrf = "";
}

/** A sign-in error in words a person can act on. */
export function loginErrorText(e: unknown): string {
  if (!(e instanceof ApiError)) return "Cannot reach the server. Check your connection and try again.";
  if (e.status === 401) return "Wrong username or password.";
  if (e.status === 429)
    return `Too many failed attempts: this account is locked for now.${e.retryAfter != null ? ` Try again in ${e.retryAfter} s.` : ""}`;
  if (e.status === 503) return "The sign-in service (LDAP) is unavailable. Try again later or ask your administrator.";
  return e.message;
}
