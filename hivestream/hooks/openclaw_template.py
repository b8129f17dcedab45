"""The OpenClaw hook hivestream installs: ``HOOK.md`` and ``handler.ts`` (templates).

``__HIVESTREAM_URL__`` is replaced by the ingest URL at install time. The handler is plain
JavaScript that is also valid TypeScript (no type annotations), so OpenClaw's loader and plain Node
(as ``.mjs``) both run it. Kept as strings so they ship inside the package.
"""

from __future__ import annotations

HOOK_NAME = "hivestream"
URL_MARK = "__HIVESTREAM_URL__"

HANDLER_TS = r"""// hivestream: sends OpenClaw's message:received / message:sent events to `hivestream ingest`.
// Installed by `hivestream hooks install openclaw`. The handler returns at once: the post runs in
// the background with a short timeout, so the gateway never waits for it.
// Delivery rule (the same as `hivestream hook`'s): an event leaves the local spool only on a 2xx,
// or on the server's JSON verdict that it dead-lettered it whole ("dead_lettered" >= 1,
// "truncated": false); a 2xx counts only with the server's own answer ("accepted", "durable").
// A 413 or a truncated dead letter sets it aside in rejected.ndjson; anything else
// keeps it in pending.ndjson (one line on stderr). The spool drains in batches of at most
// MAX_BATCH_BYTES / MAX_BATCH_LINES (under the server's body limit); a batch that fails on its own
// (404, 500, ...) is split until the failing event is alone, kept, and the rest go on.
import { appendFile, mkdir, readFile, readdir, rename, unlink } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";

const BASE = process.env.HIVESTREAM_INGEST_URL || "__HIVESTREAM_URL__";
const ENDPOINT = BASE.replace(/\/+$/, "") + "/v1/hooks/openclaw";
const SPOOL_DIR = process.env.HIVESTREAM_OPENCLAW_SPOOL_DIR || join(homedir(), ".openclaw", "hivestream-spool");
const SPOOL = join(SPOOL_DIR, "pending.ndjson");
const REJECTED = join(SPOOL_DIR, "rejected.ndjson");
const TIMEOUT_MS = 3000;
const MAX_BATCH_BYTES = Number(process.env.HIVESTREAM_OPENCLAW_BATCH_BYTES) || 256 * 1024;
const MAX_BATCH_LINES = 500;
const STOP = [0, 401, 403, 408, 429, 502, 503, 504];
const CLAIM = /^pending\.ndjson\.(\d+)\.[0-9.]+\.sending$/;

function headers() {
  const token = process.env.HIVESTREAM_INGEST_TOKEN;
  return Object.assign({ "content-type": "application/x-ndjson" }, token ? { authorization: "Bearer " + token } : {});
}

async function post(body) {
  try {
    const res = await fetch(ENDPOINT, { method: "POST", headers: headers(), body, signal: AbortSignal.timeout(TIMEOUT_MS) });
    return { status: res.status, text: await res.text() };
  } catch {
    return { status: 0, text: "" };
  }
}

// "delivered" | "dead_lettered" | "set_aside" | "retry" | "stop" (hivestream/hooks/delivery.py)
function verdict(status, text) {
  if (status === 413) return "set_aside";
  const ok = status >= 200 && status < 300;
  if (ok || status === 400 || status === 422) {
    let a = null;
    try { a = JSON.parse(text); } catch {}
    if (!a || typeof a !== "object" || Array.isArray(a)) return "retry";
    if (ok) {
      // only the server's own answer proves the payload durable (not another web server's 2xx)
      return Number.isInteger(a.accepted) && ["broker", "spool", "log"].includes(a.durable) ? "delivered" : "retry";
    }
    if (Number.isInteger(a.dead_lettered) && a.dead_lettered >= 1) {
      if (a.truncated === true) return "set_aside";
      if (a.truncated === false) return "dead_lettered";
    }
    return "retry";
  }
  return STOP.includes(status) ? "stop" : "retry";
}

async function keep(text, file = SPOOL) {
  if (!text) return;
  await mkdir(SPOOL_DIR, { recursive: true, mode: 0o700 });
  await appendFile(file, text, { mode: 0o600 });
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code === "EPERM";
  }
}

// claims pending.ndjson, the claims of processes that are gone and this process's own leftovers
// (a flush that failed half-way; only one flush runs at a time), by atomic renames
async function claimAll() {
  const claimed = [];
  const name = () => SPOOL + "." + process.pid + "." + Date.now() + "." + claimed.length + ".sending";
  let mine = name();
  try {
    await rename(SPOOL, mine);
    claimed.push(mine);
  } catch {}
  let entries = [];
  try {
    entries = await readdir(SPOOL_DIR, { withFileTypes: true });
  } catch {}
  for (const e of entries) {
    const n = e.name;
    const m = CLAIM.exec(n);
    if (!m || !e.isFile() || claimed.includes(join(SPOOL_DIR, n))) continue;
    if (Number(m[1]) !== process.pid && alive(Number(m[1]))) continue;
    mine = name();
    try {
      await rename(join(SPOOL_DIR, n), mine);
      claimed.push(mine);
    } catch {}
  }
  return claimed;
}

function batches(lines) {
  const out = [];
  let cur = [];
  let size = 0;
  for (const ln of lines) {
    const n = Buffer.byteLength(ln, "utf8") + 1;
    if (cur.length && (size + n > MAX_BATCH_BYTES || cur.length >= MAX_BATCH_LINES)) {
      out.push(cur);
      cur = [];
      size = 0;
    }
    cur.push(ln);
    size += n;
  }
  if (cur.length) out.push(cur);
  return out;
}

const joined = (lines) => lines.map((l) => l + "\n").join("");

let flushing = false;

async function flushSpool() {
  if (flushing) return;
  flushing = true;
  try {
    for (const claimed of await claimAll()) {
      let text;
      try {
        text = await readFile(claimed, "utf8");
      } catch (err) {
        console.error("[hivestream] cannot read " + claimed + ":", err.message);
        continue;
      }
      const queue = batches(text.split("\n").filter((l) => l.trim()));
      let kept = "";
      let aside = "";
      let stopped = false;
      while (queue.length) {
        const batch = queue.shift();
        if (stopped) {
          kept += joined(batch);
          continue;
        }
        const r = await post(joined(batch));
        const v = verdict(r.status, r.text);
        if (v === "delivered" || v === "dead_lettered") continue;
        if (batch.length > 1 && (v === "set_aside" || v === "retry")) {
          const half = Math.ceil(batch.length / 2);
          queue.unshift(batch.slice(0, half), batch.slice(half));
          continue;
        }
        if (v === "set_aside") aside += joined(batch);
        else kept += joined(batch);
        if (v === "stop") stopped = true;
        console.error("[hivestream] " + batch.length + " spooled event(s) not delivered (HTTP " + (r.status || "no answer") + "); kept in " +
          (v === "set_aside" ? REJECTED : SPOOL));
      }
      await keep(kept);
      await keep(aside, REJECTED);
      await unlink(claimed);
    }
  } finally {
    flushing = false;
  }
}

async function send(event) {
  const payload = {
    type: event.type,
    action: event.action,
    sessionKey: event.sessionKey,
    timestamp: event.timestamp == null ? Date.now() : event.timestamp,
    context: event.context,
  };
  const line = JSON.stringify(payload) + "\n";
  const r = await post(line);
  const v = verdict(r.status, r.text);
  if (v === "delivered") return flushSpool();
  if (v === "dead_lettered") return;
  await keep(line, v === "set_aside" ? REJECTED : SPOOL);
  console.error("[hivestream] event not delivered (HTTP " + (r.status || "no answer") + "); kept in " + (v === "set_aside" ? REJECTED : SPOOL));
}

export default function handler(event) {
  if (!event || event.type !== "message" || (event.action !== "received" && event.action !== "sent")) return;
  send(event).catch((err) => console.error("[hivestream] could not post or spool an event:", err));
}
"""

HOOK_MD = r"""---
name: hivestream
description: "Send message:received and message:sent to hivestream ingest (never blocks; spools on failure)"
metadata:
  { "openclaw": { "events": ["message:received", "message:sent"] } }
---

# hivestream

Posts every incoming and outgoing message of the gateway to `hivestream ingest`
(`HIVESTREAM_INGEST_URL`, default `__HIVESTREAM_URL__`; bearer token from
`HIVESTREAM_INGEST_TOKEN`), where it becomes a memory frame. The post runs in the background with
a 3 s timeout; an event leaves the spool only on a 2xx or the server's verdict that it was
dead-lettered whole: anything else keeps it in `~/.openclaw/hivestream-spool/pending.ndjson`, sent in
bounded batches after the next successful post (a 413 or a truncated dead letter sets it aside in
`rejected.ndjson`). Installed by `hivestream hooks install openclaw`; removed by
`hivestream hooks uninstall openclaw`.
"""


def render(template: str, url: str) -> str:
    """``template`` with the ingest URL filled in (``url`` must not contain a quote or a backslash).

    Raises:
        ValueError: for a URL with a quote, backslash or newline.
    """
    if any(c in url for c in "\"'\\\n`"):
        raise ValueError("ingest URL must not contain quotes, backslashes or newlines")
    return template.replace(URL_MARK, url)
