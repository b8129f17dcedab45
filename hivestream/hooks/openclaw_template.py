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
// the background with a short timeout, so the gateway never waits for it. A post that fails (no
// server, timeout, 401, 408, 429, 5xx) is appended to a local NDJSON spool file, which the next
// successful post forwards. Payloads the server rejects for good (400, 404, 422) are
// dead-lettered by the server and not kept here.
import { appendFile, mkdir, readFile, rename, unlink } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";

const BASE = process.env.HIVESTREAM_INGEST_URL || "__HIVESTREAM_URL__";
const ENDPOINT = BASE.replace(/\/+$/, "") + "/v1/hooks/openclaw";
const SPOOL_DIR = process.env.HIVESTREAM_OPENCLAW_SPOOL_DIR || join(homedir(), ".openclaw", "hivestream-spool");
const SPOOL = join(SPOOL_DIR, "pending.ndjson");
const TIMEOUT_MS = 3000;
const FINAL = [400, 404, 422];

function headers() {
  const token = process.env.HIVESTREAM_INGEST_TOKEN;
  return Object.assign({ "content-type": "application/x-ndjson" }, token ? { authorization: "Bearer " + token } : {});
}

async function post(body) {
  try {
    const res = await fetch(ENDPOINT, { method: "POST", headers: headers(), body, signal: AbortSignal.timeout(TIMEOUT_MS) });
    await res.arrayBuffer();
    return res.status;
  } catch {
    return 0;
  }
}

async function keep(text) {
  await mkdir(SPOOL_DIR, { recursive: true, mode: 0o700 });
  await appendFile(SPOOL, text, { mode: 0o600 });
}

let flushing = false;

async function flushSpool() {
  if (flushing) return;
  flushing = true;
  const claimed = SPOOL + "." + process.pid + "." + Date.now() + ".sending";
  try {
    await rename(SPOOL, claimed);
  } catch {
    flushing = false;
    return;
  }
  try {
    const text = await readFile(claimed, "utf8");
    const status = text.trim() ? await post(text) : 200;
    if (!((status >= 200 && status < 300) || FINAL.includes(status))) await keep(text);
    await unlink(claimed);
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
  const status = await post(line);
  if (status >= 200 && status < 300) return flushSpool();
  if (FINAL.includes(status)) return;
  await keep(line);
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
a 3 s timeout; a failed post is kept in `~/.openclaw/hivestream-spool/pending.ndjson` and sent with
the next successful one. Installed by `hivestream hooks install openclaw`; removed by
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
