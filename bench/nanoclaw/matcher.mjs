// Anchor for bench/bench_matcher.py: the memory-stub matcher as NanoClaw's runtime hook runs it, in
// JavaScript on Node, written from the seed's description (shared/the NanoClaw memory-stubs design (docs/design.md#sources)):
// for each incoming message, decode its embedding, compute the cosine similarity against every stub
// of its channel and every global stub (dot product and both norms per stub, as db.js's
// cosineSimilarity does on Float32Array embeddings), keep those at or above the threshold, and take
// the best first, up to top N, skipping a stub whose archive does not fit the remaining token budget.
//
// Input (argv[2], JSON): {dim, threshold, top_n, token_budget, stubs_file, stubs: [[channel|null, id, tokens], ...],
// messages: [[channel, embedding base64 (float32 little-endian)], ...]}; stubs_file holds the stubs'
// float32 vectors back to back, in the order of "stubs" (loaded before any timing, as NanoClaw's
// stubs.db rows would be). Then one command per stdin line:
//   "match"  -> match every message once, print {"seconds", "matched", "chosen": [[id, ...] per message]}
//   anything else ends the program.
// Usage: node matcher.mjs INPUT.json  (driven by bench/bench_matcher.py, alternating with hivestream's matcher)
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";

const input = JSON.parse(readFileSync(process.argv[2], "utf8"));
const dim = input.dim;
const raw = readFileSync(input.stubs_file);
const all = new Float32Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.byteLength));
const byChannel = new Map();
const globals = [];
input.stubs.forEach(([channel, id, tokens], i) => {
  const stub = { id, tokens, embedding: all.subarray(i * dim, (i + 1) * dim) };
  if (channel === null) globals.push(stub);
  else {
    if (!byChannel.has(channel)) byChannel.set(channel, []);
    byChannel.get(channel).push(stub);
  }
});

function cosineSimilarity(a, b) {
  let dot = 0, na = 0, nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i] * b[i];
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  return na && nb ? dot / (Math.sqrt(na) * Math.sqrt(nb)) : 0;
}

function decode(b64) {
  const buf = Buffer.from(b64, "base64");
  return new Float32Array(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength));
}

function match(channel, b64) {
  const q = decode(b64);
  const scored = [];
  for (const [stubs, order] of [[byChannel.get(channel) || [], 0], [globals, 1]]) {
    for (const s of stubs) {
      const sim = cosineSimilarity(s.embedding, q);
      if (sim >= input.threshold) scored.push({ sim, id: s.id, order, tokens: s.tokens });
    }
  }
  scored.sort((x, y) => y.sim - x.sim || x.id - y.id || x.order - y.order);
  const out = [];
  let left = input.token_budget;
  for (const c of scored) {
    if (out.length === input.top_n) break;
    if (c.tokens > left) continue;
    left -= c.tokens;
    out.push(c.id);
  }
  return out;
}

const rl = createInterface({ input: process.stdin });
for await (const line of rl) {
  if (line.trim() !== "match") break;
  const t0 = performance.now();
  const chosen = input.messages.map(([channel, b64]) => match(channel, b64));
  const seconds = (performance.now() - t0) / 1000;
  console.log(JSON.stringify({ seconds, matched: chosen.filter((c) => c.length).length, chosen }));
}
