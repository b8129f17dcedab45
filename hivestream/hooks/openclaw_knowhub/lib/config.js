// The plugin's options: openclaw.plugin.json's configSchema, with its defaults filled in. OpenClaw
// validates `plugins.entries.hivestream-knowhub.config` against that schema (defaults applied)
// before register(api); this module repeats the defaults and the checks so a value of the wrong
// type, or a host that passes the raw object, gives one warning and the default, never a crash.

export const PLUGIN_ID = "hivestream-knowhub";

export const DEFAULTS = Object.freeze({
  apiUrl: "http://127.0.0.1:8787",
  hooksUrl: "",
  apiToken: "",
  apiTokenEnv: "HIVESTREAM_AGENT_TOKEN",
  hooksTokenEnv: "HIVESTREAM_INGEST_TOKEN",
  submittedBy: "",
  shareExperiences: true,
  reminderMode: "both",
  postHookEvents: true,
  enableServerExtraction: false,
  privacyMode: "strict",
  requireApproval: true,
  timeoutMs: 8000,
  searchLimit: 5,
  stubsMatch: true,
  stubsChannel: "session",
});

const CHOICES = { reminderMode: ["both", "start", "periodic", "off"], privacyMode: ["strict", "relaxed"], stubsChannel: ["session", "channel"] };
const RANGES = { timeoutMs: [500, 60000], searchLimit: [1, 20] };
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

function loopback(hostname) {
  const h = hostname.replace(/^\[|\]$/g, "").toLowerCase();
  return h === "localhost" || h === "::1" || /^127(\.\d{1,3}){3}$/.test(h);
}

// null when `url` may be used, else the reason (one line). The seed's local-first rule: plain http
// only to a loopback host; anything else needs https.
export function urlProblem(url) {
  let u;
  try {
    u = new URL(url);
  } catch {
    return `${JSON.stringify(String(url).slice(0, 200))} is not a URL`;
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") return `${u.protocol} is not http or https`;
  if (u.username || u.password) return "credentials in the URL are not accepted (use the token options)";
  if (u.protocol === "http:" && !loopback(u.hostname)) return `plain http to ${u.hostname} is refused: use https, or a loopback address`;
  return null;
}

// The options from `raw` (plugins.entries.<id>.config) and the environment `env`.
// Returns { cfg, problems }: cfg has every key of DEFAULTS plus the resolved `apiBase`, `hooksBase`
// (null when refused), `apiKey`, `hooksKey` (bearer tokens, "" when none) and `apiProblem`;
// problems are one-line warnings naming the option (never a token's value).
export function resolveConfig(raw, env) {
  const src = raw && typeof raw === "object" && !Array.isArray(raw) ? raw : {};
  const problems = [];
  const cfg = {};
  for (const [key, def] of Object.entries(DEFAULTS)) {
    let v = src[key];
    if (v === undefined || v === null) v = def;
    else if (typeof v !== typeof def) {
      problems.push(`option ${key} must be a ${typeof def}, got ${Array.isArray(v) ? "array" : typeof v}: using ${JSON.stringify(def)}`);
      v = def;
    } else if (CHOICES[key] && !CHOICES[key].includes(v)) {
      problems.push(`option ${key} must be one of ${CHOICES[key].join(", ")}, got ${JSON.stringify(v).slice(0, 60)}: using ${JSON.stringify(def)}`);
      v = def;
    } else if (RANGES[key] && !(Number.isInteger(v) && v >= RANGES[key][0] && v <= RANGES[key][1])) {
      problems.push(`option ${key} must be an integer in ${RANGES[key][0]}..${RANGES[key][1]}: using ${def}`);
      v = def;
    } else if (key.endsWith("TokenEnv") && !ENV_NAME.test(v)) {
      problems.push(`option ${key} must name an environment variable: using ${def}`);
      v = def;
    }
    cfg[key] = v;
  }
  const vars = env && typeof env === "object" ? env : {};
  const strip = (u) => u.replace(/\/+$/, "");
  cfg.apiProblem = urlProblem(cfg.apiUrl);
  cfg.apiBase = cfg.apiProblem ? null : strip(cfg.apiUrl);
  if (cfg.apiProblem) problems.push(`option apiUrl: ${cfg.apiProblem}; the KnowHub tools answer with this error`);
  const hooksUrl = cfg.hooksUrl || cfg.apiUrl;
  const hooksProblem = cfg.hooksUrl ? urlProblem(cfg.hooksUrl) : cfg.apiProblem;
  cfg.hooksBase = hooksProblem ? null : strip(hooksUrl);
  if (cfg.hooksUrl && hooksProblem) problems.push(`option hooksUrl: ${hooksProblem}; hook events are not posted`);
  cfg.apiKey = cfg.apiToken || String(vars[cfg.apiTokenEnv] || "");
  cfg.hooksKey = String(vars[cfg.hooksTokenEnv] || "") || cfg.apiKey;
  return { cfg, problems };
}
