// The plugin's HTTP: requests to hivestream's agent API (/api/*, see the agent API contract) with a
// time budget, and the fire-and-forget, in-order delivery of the plugin's own hook events to
// /v1/hooks/openclaw-plugin. Nothing here throws: a failure is a value, and a token never appears
// in a result, an error text or a log line.

import { PLUGIN_ID } from "./config.js";

const MAX_ANSWER_BYTES = 1 << 20;

function headers(token, json) {
  const h = { accept: "application/json" };
  if (json) h["content-type"] = "application/json";
  if (token) h.authorization = "Bearer " + token;
  return h;
}

function reason(err) {
  const name = err && (err.name || (err.cause && err.cause.code));
  if (name === "TimeoutError") return "timed out";
  if (name === "AbortError") return "was cancelled";
  const code = err && err.cause && err.cause.code;
  return code ? `failed (${code})` : "failed";
}

// One request to the agent API. Returns { ok, status, data, error }: ok for a 2xx with a JSON body;
// error is one line naming what went wrong (status and the server's error code/detail), else "".
// `signal`: the caller's cancellation (the tool call's), combined with the `timeoutMs` budget.
export async function callApi({ base, token, timeoutMs, signal }, method, path, body) {
  if (!base) return { ok: false, status: 0, data: null, error: "KnowHub is not configured (see the plugin's apiUrl warning)" };
  const budget = AbortSignal.timeout(timeoutMs);
  const any = signal && typeof AbortSignal.any === "function" ? AbortSignal.any([budget, signal]) : budget;
  let res;
  try {
    res = await fetch(base + path, {
      method, headers: headers(token, body !== undefined), body: body === undefined ? undefined : JSON.stringify(body), signal: any,
    });
  } catch (err) {
    return { ok: false, status: 0, data: null, error: `KnowHub at ${base} ${reason(err)} (budget ${timeoutMs} ms)` };
  }
  let text = "";
  try {
    text = await res.text();
  } catch (err) {
    return { ok: false, status: res.status, data: null, error: `KnowHub answer could not be read: ${reason(err)}` };
  }
  let data = null;
  if (text.length <= MAX_ANSWER_BYTES) {
    try {
      data = JSON.parse(text);
    } catch {
      data = null;
    }
  }
  if (res.ok && data !== null) return { ok: true, status: res.status, data, error: "" };
  const code = data && typeof data === "object" && typeof data.error === "string" ? data.error : "";
  const detail = data && typeof data === "object" && typeof data.detail === "string" ? data.detail : "";
  const what = res.ok ? "an answer that is not JSON" : `${res.status}${code ? " " + code : ""}${detail ? ": " + detail : ""}`;
  return { ok: false, status: res.status, data, error: `KnowHub answered ${what}`.slice(0, 300) };
}

const DURABLE = ["broker", "spool", "log"];

// What hivestream's answer to a hook post means (the rule of hivestream/hooks/delivery.py):
// "delivered" (2xx with hivestream's own JSON answer), "refused" (the server dead-lettered the
// payloads whole: 400/422 with dead_lettered >= 1), "too_large" (413), else "retry".
export function deliveryVerdict(status, text) {
  if (status === 413) return "too_large";
  const ok = status >= 200 && status < 300;
  if (!ok && status !== 400 && status !== 422) return "retry";
  let a = null;
  try {
    a = JSON.parse(text);
  } catch {
    return "retry";
  }
  if (!a || typeof a !== "object") return "retry";
  if (ok) return Number.isInteger(a.accepted) && DURABLE.includes(a.durable) ? "delivered" : "retry";
  return Number.isInteger(a.dead_lettered) && a.dead_lettered >= 1 ? "refused" : "retry";
}

// Posts objects as NDJSON to `url`, in the order they were pushed, one request at a time, in the
// background: push() returns at once. A batch leaves the queue when hivestream stored it (or
// dead-lettered it); otherwise it stays and is tried again after a growing pause (0.5 s .. 60 s; the
// timer does not keep the process alive). At most `maxQueue` wait; past that the oldest is dropped
// (one warning). Order matters: hivestream replays the reminder counter from these events in the
// order they arrive.
export class EventPoster {
  constructor({ url, token, timeoutMs = 3000, maxQueue = 5000, batchSize = 200, logger }) {
    this.url = url;
    this.token = token;
    this.timeoutMs = timeoutMs;
    this.maxQueue = maxQueue;
    this.batchSize = batchSize;
    this.logger = logger;
    this.queue = [];
    this.running = false;
    this.timer = null;
    this.failures = 0;
    this.dropped = 0;
    this.sent = 0;
  }

  push(obj) {
    if (this.queue.length >= this.maxQueue) {
      this.queue.shift();
      if (this.dropped++ === 0) this._warn(`more than ${this.maxQueue} hook events wait for ${this.url}; dropping the oldest`);
    }
    this.queue.push(JSON.stringify(obj));
    this._kick();
  }

  _warn(msg) {
    try {
      this.logger?.warn?.(`${PLUGIN_ID}: ${msg}`);
    } catch {
      // a logger that throws is not the agent's problem
    }
  }

  _kick() {
    if (this.running || this.timer) return;
    this.running = true;
    this._loop().finally(() => {
      this.running = false;
      if (this.queue.length && !this.timer) this._kick();
    });
  }

  async _send(lines) {
    try {
      const res = await fetch(this.url, {
        method: "POST",
        headers: Object.assign({ "content-type": "application/x-ndjson" }, this.token ? { authorization: "Bearer " + this.token } : {}),
        body: lines.map((l) => l + "\n").join(""),
        signal: AbortSignal.timeout(this.timeoutMs),
      });
      return { verdict: deliveryVerdict(res.status, await res.text()), status: res.status };
    } catch (err) {
      return { verdict: "retry", status: 0, why: reason(err) };
    }
  }

  async _loop() {
    while (this.queue.length) {
      const n = Math.min(this.batchSize, this.queue.length);
      const r = await this._send(this.queue.slice(0, n));
      if (r.verdict === "delivered" || r.verdict === "refused") {
        this.queue.splice(0, n);
        if (r.verdict === "refused") this._warn(`hivestream dead-lettered ${n} hook event(s) (HTTP ${r.status})`);
        else this.sent += n;
        if (this.failures) this._warn(`hook events are delivered again to ${this.url}`);
        this.failures = 0;
        continue;
      }
      if (r.verdict === "too_large") {
        if (n > 1) {
          this.batchSize = Math.max(1, n >> 1);
          continue;
        }
        this.queue.splice(0, 1);
        this._warn("a hook event over the server's body limit was dropped");
        continue;
      }
      if (this.failures++ === 0) {
        this._warn(`hook events not delivered to ${this.url} (${r.status ? "HTTP " + r.status : r.why}); kept and retried in the background`);
      }
      const pause = Math.min(60000, 500 * 2 ** Math.min(this.failures - 1, 7));
      this.timer = setTimeout(() => {
        this.timer = null;
        this._kick();
      }, pause);
      this.timer.unref?.();
      return;
    }
  }

  // Try to deliver what waits (now, not after the pause), for at most `timeoutMs`; true when nothing waits.
  async drain(timeoutMs) {
    const deadline = Date.now() + timeoutMs;
    let retried = false;
    while ((this.queue.length || this.running) && Date.now() < deadline) {
      if (this.timer && !retried) {
        clearTimeout(this.timer);
        this.timer = null;
        retried = true;
        this._kick();
      }
      await new Promise((r) => setTimeout(r, 10));
    }
    return this.queue.length === 0 && !this.running;
  }
}
