// Load generator of bench/bench_ingest.py's single-event case (autocannon; latency measured here,
// client side). Usage: node singles.mjs URL CONNECTIONS SECONDS TAG
// Each request carries one Claude Code UserPromptSubmit payload with a unique prompt, so every
// acknowledged payload is a distinct event id on hook-events. Prints autocannon's JSON result.
import autocannon from 'autocannon'

const [url, connections, seconds, tag] = process.argv.slice(2)
let n = 0
const body = () => JSON.stringify({
  session_id: `bench-${tag}-${n % 97}`,
  hook_event_name: 'UserPromptSubmit',
  cwd: '/work/bench',
  transcript_path: 'projects/bench/s.jsonl',
  permission_mode: 'default',
  prompt: `${tag} ${n}: please refactor the ingestion module and keep the tests green ${process.pid}-${n++}`,
  event_time_ms: 1790000000000 + n
})

const result = await autocannon({
  url,
  connections: Number(connections),
  duration: Number(seconds),
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  requests: [{ setupRequest: (req) => ({ ...req, body: body() }) }]
})
process.stdout.write(JSON.stringify({ ...result, posted: n }) + '\n')
