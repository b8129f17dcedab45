// Anchor for bench/bench_run.py: hive-mind's dedup as it stores frames today, one capture at a time:
// sha256(stripHmPrefix(content).trim()), a lookup on an indexed content_hash column, then an UPDATE
// (touch) or an INSERT (new frame), in a SQLite file through better-sqlite3 (WAL, synchronous=NORMAL).
// Input: a JSON array of [content, event_time_ms] pairs, parsed before the clock starts.
// Usage: node dedup.mjs CAPTURES.json DB_FILE  -> prints {"captures", "frames", "seconds"} as JSON
import Database from "better-sqlite3";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";

const captures = JSON.parse(readFileSync(process.argv[2], "utf8"));
const db = new Database(process.argv[3]);
db.pragma("journal_mode = WAL");
db.pragma("synchronous = NORMAL");
db.exec(`CREATE TABLE frames (id INTEGER PRIMARY KEY, content TEXT NOT NULL, content_hash TEXT NOT NULL,
         created_at INTEGER NOT NULL, last_accessed_at INTEGER NOT NULL, access_count INTEGER NOT NULL);
         CREATE INDEX idx_frames_content_hash ON frames(content_hash);`);
const find = db.prepare("SELECT id FROM frames WHERE content_hash = ? ORDER BY id DESC LIMIT 1");
const insert = db.prepare("INSERT INTO frames (content, content_hash, created_at, last_accessed_at, access_count) VALUES (?, ?, ?, ?, 1)");
const touch = db.prepare("UPDATE frames SET access_count = access_count + 1, last_accessed_at = ? WHERE id = ?");
const strip = (s) => s.replace(/^\[hm [^\]]*\]\s*/, "");

const t0 = performance.now();
let frames = 0;
for (const [content, t] of captures) {
  const hash = createHash("sha256").update(strip(content).trim()).digest("hex");
  const row = find.get(hash);
  if (row) {
    touch.run(t, row.id);
  } else {
    insert.run(content, hash, t, t);
    frames += 1;
  }
}
const seconds = (performance.now() - t0) / 1000;
db.close();
console.log(JSON.stringify({ captures: captures.length, frames, seconds }));
