// A finished run's messages as the body of POST /api/extract ({role, content} pairs, the seed's
// sanitizeMessage): only the roles and their text (no timestamps, ids, images, thinking or
// metadata), the plugin's own injected blocks removed (so an extraction never learns from its own
// reminders), and in privacyMode "strict" every text redacted on the client first.

import { stripInjected } from "./format.js";
import { redact } from "./redact.js";

export const MAX_MESSAGES = 200; // the last ones of the run
export const MAX_MESSAGE_CHARS = 8000;
export const MAX_TOTAL_CHARS = 200000;

const ROLES = { user: "user", assistant: "assistant", toolResult: "tool", tool: "tool" };

function textOf(content) {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  const parts = [];
  for (const block of content) {
    if (!block || typeof block !== "object") continue;
    if (block.type === "text" && typeof block.text === "string") parts.push(block.text);
    else if (block.type === "toolCall" && typeof block.name === "string") parts.push(`[tool call: ${block.name}]`);
  }
  return parts.join("\n");
}

// `messages` (agent_end's event.messages, any shape) → [{role, content}] and the redactions made
// ({kind: n}). Never throws.
export function extractMessages(messages, privacyMode) {
  const out = [];
  const counts = {};
  for (const m of Array.isArray(messages) ? messages.slice(-MAX_MESSAGES) : []) {
    if (!m || typeof m !== "object") continue;
    const role = ROLES[m.role];
    if (!role) continue;
    let text = stripInjected(textOf(m.content)).trim();
    if (!text) continue;
    if (privacyMode !== "relaxed") {
      const r = redact(text);
      text = r.text;
      for (const [k, n] of Object.entries(r.counts)) counts[k] = (counts[k] || 0) + n;
    }
    out.push({ role, content: text.length > MAX_MESSAGE_CHARS ? text.slice(0, MAX_MESSAGE_CHARS) + " [truncated]" : text });
  }
  let total = out.reduce((n, m) => n + m.content.length, 0);
  while (out.length > 1 && total > MAX_TOTAL_CHARS) total -= out.shift().content.length;
  return { messages: out, counts };
}
