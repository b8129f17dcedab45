// The client-side redaction of privacyMode "strict": what leaves the agent's machine for server-side
// extraction has its secrets and personal data replaced by typed placeholders "[REDACTED:<kind>]"
// first. It mirrors the kinds and placeholders of hivestream's own rules
// (streams/redaction/rules.py and checks.py, which the server applies again, idempotently): the
// seed's redactSensitiveInfo (e-mail, phone, home-directory user names, sk- keys) and the
// providers' token formats, assignments and named credentials, payment cards (Luhn), private keys.
// Simplified where the Python rules are finer; a placeholder is never matched again.

const TS = "(?<![A-Za-z0-9_\\-])"; // a token starts here (not inside a longer identifier)
const TE = "(?![A-Za-z0-9_\\-])"; // and ends here

function luhn(digits) {
  let total = 0;
  for (let i = 0; i < digits.length; i++) {
    let d = digits.charCodeAt(digits.length - 1 - i) - 48;
    if (i % 2 === 1) d = d > 4 ? d * 2 - 9 : d * 2;
    total += d;
  }
  return total % 10 === 0;
}

const count = (s, re) => (s.match(re) || []).length;

// A value named as a secret reads as one (checks.py credential_like): 8–256 characters with letters
// and digits, and a 6+-character piece mixing them, or upper, lower and digits (10+ characters);
// not a version or date, not a dotted / snake_case identifier of words.
export function credentialLike(value) {
  if (value.length < 8 || value.length > 256 || /^v?\d+(?:[.\-/:]\d+)+[a-z]*$/.test(value)) return false;
  if (!/\d/.test(value) || !/[A-Za-z]/.test(value)) return false;
  const pieces = value.split(/[\-_./:+=~]+/).filter(Boolean);
  const mixed = pieces.some((p) => p.length >= 6 && /\d/.test(p) && /[A-Za-z]/.test(p));
  const three = /[A-Z]/.test(value) && /[a-z]/.test(value) && /\d/.test(value);
  if (/^[A-Za-z][A-Za-z0-9]*(?:[._][A-Za-z0-9]+)+$/.test(value) && !pieces.some((p) => p.length >= 8 && count(p, /\d/g) >= 2)) return false;
  return mixed || (three && value.length >= 10);
}

const SECRET_NAME = "(?:secret(?:[_-]?key)?|password|passwd|token|api[_-]?key|access[_-]?key|private[_-]?key|signing[_-]?key|auth[_-]?key)";
const NAMED = "(?:(?:aws[ _-]?)?secret(?:[ _-]access)?(?:[ _-]key)?|client[ _-]secret|password|passwd|passphrase|pass phrase" +
  "|api[ _-]?key|access[ _-]key|(?:access|auth|refresh|bearer|api|session)[ _-]token|token)";
const USER = "[^\\\\/\\s\"'`<>|:;,()\\[\\]{}*?]+";
// case-insensitive `word` without the i flag (Node 20 has no inline (?i:…) groups)
const ci = (word) => word.replace(/[a-z]/g, (c) => `[${c}${c.toUpperCase()}]`);
const NOT_A_USER = `(?!(?:${["shared", "public", "default(?: user)?", "all users", "guest", "linuxbrew"].map(ci).join("|")})(?![A-Za-z0-9._-]))`;
const WIN_HOME = `(?:${ci("users")}|${ci("documents and settings")})`;

// [kind, regex (global), optional accept(match) -> bool]; the "secret" group, when present, is what
// is replaced, else the whole match. Order as in rules.py: private keys and provider tokens first.
const RULES = [
  ["private_key", /-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|$)/g],
  ["anthropic_key", new RegExp(`${TS}sk-ant-(?:api|admin|oat|ort)\\d{2}-[A-Za-z0-9_\\-]{20,}${TE}`, "g")],
  ["openai_key", new RegExp(`${TS}sk-(?:[A-Za-z0-9]{32,}|(?=[A-Za-z0-9_\\-]*\\d)[A-Za-z0-9_\\-]{20,})${TE}`, "g")],
  ["stripe_key", new RegExp(`${TS}(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}${TE}`, "g")],
  ["aws_key", /(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])/g],
  ["aws_key", /aws_?secret_?access_?key["']?\s*[:=]\s*["']?(?<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])/gi],
  ["github_token", /(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})(?![A-Za-z0-9_])/g],
  ["gitlab_token", new RegExp(`${TS}glpat-[A-Za-z0-9_\\-]{20,}${TE}`, "g")],
  ["slack_token", new RegExp(`${TS}(?:xoxe\\.)?xox[abposre]-[A-Za-z0-9\\-]{10,}${TE}`, "g")],
  ["slack_token", new RegExp(`${TS}xapp-\\d-[A-Za-z0-9\\-]{10,}${TE}`, "g")],
  ["slack_token", /hooks\.slack\.com\/(?:services|workflows|triggers)\/(?<secret>[A-Za-z0-9_\-]+(?:\/[A-Za-z0-9_\-]+)*)/g],
  ["google_key", new RegExp(`${TS}(?:AIza[0-9A-Za-z_\\-]{35}|ya29\\.[0-9A-Za-z_\\-]{20,}|GOCSPX-[0-9A-Za-z_\\-]{20,})${TE}`, "g")],
  ["huggingface_token", /(?<![A-Za-z0-9_])hf_[A-Za-z0-9]{30,}(?![A-Za-z0-9_])/g],
  ["npm_token", /(?<![A-Za-z0-9_])npm_[A-Za-z0-9]{36}(?![A-Za-z0-9_])/g],
  ["bearer_token", /(?<![A-Za-z0-9])bearer\s+(?<secret>(?=[A-Za-z0-9._~+/\-]*\d)[A-Za-z0-9._~+/\-]{8,}=*)(?![A-Za-z0-9._~+/=\-])/gi],
  ["jwt", new RegExp(`${TS}eyJ[A-Za-z0-9_\\-]{6,}\\.eyJ[A-Za-z0-9_\\-]{6,}\\.[A-Za-z0-9_\\-]*${TE}`, "g")],
  ["auth_header", /authorization["']?\s*[:=]\s*["']?(?:basic|token|bot)\s+(?<secret>[A-Za-z0-9+/._~\-]{8,}=*)(?![A-Za-z0-9+/._~=\-])/gi],
  ["url_credentials", /(?<=:\/\/)(?<secret>[^\s/:@\[\]{}"'<>]+:[^\s/@\[\]{}"'<>]+)@/g],
  ["secret", new RegExp(`(?<![A-Za-z0-9_.\\-])[A-Za-z0-9_.\\-]*?${SECRET_NAME}\\\\?["']?\\s*[:=]\\s*\\\\?(?<q>["'\`])` +
    `(?<secret>(?![$%<{*/~.\\[])[^\\r\\n"'\`\\\\]{8,4096})\\\\?\\k<q>`, "gi"), (m) => /\d/.test(m.groups.secret) && /[A-Za-z]/.test(m.groups.secret)],
  ["secret", new RegExp(`(?<![A-Za-z0-9_.\\-])[A-Za-z0-9_.\\-]*?${SECRET_NAME}\\\\?["']?(?<sep>\\s*[:=]\\s*)` +
    `(?<secret>(?![$%<{*/~.\\[\"'\`])[^\\s"'\`,;&()\\[\\]{}<>\\\\]{8,4096})(?=[\\s"'\`,;&\\\\]|$)`, "gi"), (m) => {
    const v = m.groups.secret;
    if (!/\d/.test(v) || !/[A-Za-z]/.test(v)) return false;
    const codeLike = m.groups.sep !== m.groups.sep.trim() && (v.includes("_") || v.includes("."));
    return !(codeLike && /^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$/.test(v));
  }],
  ["named_secret", new RegExp(`(?<![A-Za-z0-9_.\\-])${NAMED}(?![A-Za-z0-9])\\\\?["']?` +
    "(?:\\s+(?:for|of|on|in)\\s+(?:the\\s+|our\\s+|my\\s+|this\\s+)?[\\w.@\\-]+(?:\\s+[\\w.@\\-]+)?\\s*(?:[:=]|\\s(?:is|was))" +
    "|\\s*[:=]|\\s+(?:is|was|set to|changed to|to|of|is now|value)\\s*[:=]?|)" +
    "\\s*\\\\?(?<q>[\"'`]?)(?<secret>(?![$%<{*/~.\\[])[A-Za-z0-9+/=_\\-.~!@#%^&*]{8,256}?)\\\\?\\k<q>" +
    "(?=[\\s\"'`,;)\\]}]|[.!?:](?:\\s|$)|$)", "gi"), (m) => credentialLike(m.groups.secret)],
  ["home_user", new RegExp(`(?:(?<![\\w.\\-/\\\\])|(?<=/var)|(?<=/Data)|(?<=/mnt/[a-z])|(?<=file://)|(?<=-[A-Za-z]))\\\\?/(?:Users|home)\\\\?/` +
    `${NOT_A_USER}(?<secret>${USER})`, "g")],
  ["home_user", new RegExp(`(?:(?<![A-Za-z0-9])[A-Za-z]:|(?<![\\w.\\-/\\\\]))[\\\\/]{1,2}${WIN_HOME}[\\\\/]{1,2}` +
    `${NOT_A_USER}(?<secret>${USER}(?: ${USER})*(?=[\\\\/])|${USER})`, "g")],
  ["email", /(?<![A-Za-z0-9._%+\-])(?<local>[A-Za-z0-9._%+\-]+)@(?!\d+x\.)[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?)*\.[A-Za-z]{2,}(?![A-Za-z0-9\-])/g,
    (m) => m.groups.local.toLowerCase() !== "git"],
  ["card_number", /(?<![\w.,+\-/])(?<!\d:)(?:[2-6]\d{12,18}|[2-6]\d{3}(?<s>[ \-])\d{3,6}(?:\k<s>\d{3,6}){1,3})(?![\w\-/]|[.,:]\d)/g,
    (m) => { const d = m[0].replace(/\D/g, ""); return d.length >= 13 && d.length <= 19 && luhn(d); }],
  ["phone", /(?<![\w+])(?<!\d:)\+[1-9]\d{0,2}(?:[ .\-]?\(\d{1,4}\))?[ .\-]?\d+(?:[ .\-]\d+){0,6}(?!\w)(?![.\-:]\d)/g, (m) => {
    const n = count(m[0], /\d/g);
    if (n < 8 || n > 15 || /^\+\d{4,6}-\d{2}-\d{2}(?!\d)/.test(m[0])) return false;
    return !(m[0].includes(".") && count(m[0], /\d+/g) < 3);
  }],
  ["phone", /(?<![\w.+\-])(?<!\d:)(?:1[ .\-])?(?:\(\d{3}\) ?\d{3}[ .\-]|\d{3}(?<s>[ .\-])\d{3}\k<s>)\d{4}(?!\w)(?![.\-:]\d)/g],
  ["phone", /(?<![\w.+/\-])(?<!\d[ ./:\-])(?:\(0[1-9]\d{0,3}\) ?|0[1-9]\d{0,3}[ ./\-])\d{2,8}(?:(?<s>[ .\-])\d{2,8}(?:\k<s>\d{2,8}){0,2})?(?!\w)(?![ ./\-]\d{2})(?!:\d)/g,
    (m) => { const n = count(m[0], /\d/g); return n >= 9 && n <= 13 && !/^\d{5}-\d{4}$/.test(m[0]); }],
];

// `text` with every sensitive substring replaced, and the replacements per kind:
// { text, counts: { kind: n } }. Never throws (a non-string is read as its String()).
export function redact(text) {
  let out = String(text ?? "");
  const counts = {};
  for (const [kind, re, accept] of RULES) {
    re.lastIndex = 0;
    out = out.replace(re, (...args) => {
      const groups = typeof args[args.length - 1] === "object" ? args[args.length - 1] : undefined;
      const whole = args[0];
      const m = Object.assign([whole], { groups: groups || {} });
      if (accept && !accept(m)) return whole;
      counts[kind] = (counts[kind] || 0) + 1;
      const ph = `[REDACTED:${kind}]`;
      const secret = groups && groups.secret;
      if (secret === undefined) return ph;
      const at = whole.lastIndexOf(secret);
      return whole.slice(0, at) + ph + whole.slice(at + secret.length);
    });
  }
  return { text: out, counts };
}
