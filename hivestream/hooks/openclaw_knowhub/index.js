// hivestream's KnowHub plugin for OpenClaw (plain JavaScript ES module, no build step).
// Installed by `hivestream hooks install openclaw --knowhub`; the seed is
// knowhub-openclaw-integration.zh.md (MVP: tools kb_search / kb_submit / kb_content, a reminder when
// a task starts and on every third LLM call of a session, the count cleared at agent_end; optional
// server-side extraction, strict privacy by default, local first).
//
// OpenClaw loads the default export (an object with register(api)); register wires:
//   api.registerTool: kb_search, kb_submit, kb_content (listed in openclaw.plugin.json contracts.tools)
//   api.on("before_prompt_build"): static guidance as appendSystemContext; the start and periodic
//     reminders, and the memory stubs' archived sections matching the prompt (stubsMatch), as prependContext
//   api.on("after_tool_call"), api.on("agent_end"): the plugin log, the counter reset, extraction
//   api.registerService: on gateway stop, deliver what the plugin log still holds (bounded)
// Only before_prompt_build awaits the network (the stubs match, within its budget); no hook throws into the agent.

import { PLUGIN_ID, resolveConfig } from "./lib/config.js";
import { GUIDANCE, PERIODIC_REMINDER, START_REMINDER, formatExperience, formatIndex } from "./lib/format.js";
import { EventPoster, callApi } from "./lib/http.js";
import { ReminderCounter, reminderKinds } from "./lib/reminders.js";
import { extractMessages } from "./lib/transcript.js";

export const TOOL_NAMES = ["kb_search", "kb_submit", "kb_content"];
const LIMITS = { task: 2000, resource: 4000, result: 8000 };
const STOP_FLUSH_MS = 3000;
const STUBS_MATCH_MS = 2000; // a prompt waits at most this long for its memory-stub context (serve answers within 1.5 s)
const STUBS_OFF_MS = 60000; // after a 409 (the server matches no stubs), ask again after this long

const str = (v) => (typeof v === "string" ? v : v === undefined || v === null ? "" : String(v));
const keyOf = (ctx) => (ctx && typeof ctx.sessionKey === "string" && ctx.sessionKey) || "default";
const text = (t, details) => ({ content: [{ type: "text", text: t }], details });
const toolError = (t) => text(t, { error: true });

function instanceId() {
  return Math.floor(Math.random() * 0xffffffff).toString(16).padStart(8, "0");
}

function register(api) {
  const log = api.logger || {};
  const warn = (m) => {
    try {
      log.warn?.(`${PLUGIN_ID}: ${m}`);
    } catch {
      // never the agent's problem
    }
  };
  const info = (m) => {
    try {
      log.info?.(`${PLUGIN_ID}: ${m}`);
    } catch {
      // never the agent's problem
    }
  };
  const { cfg, problems } = resolveConfig(api.pluginConfig, process.env);
  for (const p of problems) warn(p);
  const kinds = reminderKinds(cfg.reminderMode);
  const counter = new ReminderCounter();
  const instance = instanceId();
  let seq = 0;
  const own = new Set(); // ids this process submitted: their writer may read them before review
  const pending = new Set(); // background work (extraction requests), awaited only by the service's stop
  const api_ = { base: cfg.apiBase, token: cfg.apiKey, timeoutMs: cfg.timeoutMs };
  const poster = cfg.postHookEvents && cfg.hooksBase
    ? new EventPoster({ url: cfg.hooksBase + "/v1/hooks/openclaw-plugin", token: cfg.hooksKey, logger: log })
    : null;

  // The plugin log: one line per hook call hivestream reads (streams/model/adapters/openclaw_plugin.py):
  // {hook, event, ctx: {agentId, sessionKey}, timestamp}. Ids only: no prompt, message or tool payload.
  const record = (hook, ctx, event) => {
    if (!poster) return;
    const c = { sessionKey: keyOf(ctx) };
    if (ctx && typeof ctx.agentId === "string" && ctx.agentId) c.agentId = ctx.agentId;
    if (ctx && typeof ctx.runId === "string" && ctx.runId) c.runId = ctx.runId;
    poster.push({ hook, event: Object.assign({ plugin: PLUGIN_ID, instance, seq: ++seq }, event), ctx: c, timestamp: Date.now() });
  };
  const background = (promise) => {
    pending.add(promise);
    promise.finally(() => pending.delete(promise));
  };

  // ------------------------------------------------------------------ tools
  const tools = {
    kb_search: (ctx) => ({
      name: "kb_search",
      label: "KnowHub search",
      description: "Search KnowHub for experiences other agents recorded (what worked or failed for a task, with which tool, API, " +
        "library or command). Call it when a task starts, before choosing an approach, with the task's key words. Answers a " +
        "compact index (id, title, score); call kb_content with an id for the whole experience.",
      parameters: {
        type: "object",
        additionalProperties: false,
        properties: {
          query: { type: "string", description: "key words of the task (error message, library, goal)" },
          agent_id: { type: "string", description: "only experiences this agent submitted (optional)" },
          limit: { type: "integer", minimum: 1, maximum: 20, description: `most results (default ${cfg.searchLimit})` },
        },
        required: ["query"],
      },
      async execute(_id, params, signal) {
        try {
          const p = params && typeof params === "object" ? params : {};
          const query = str(p.query).trim().slice(0, 1000);
          if (!query) return toolError("kb_search needs a non-empty query");
          const limit = Number.isInteger(p.limit) ? Math.min(20, Math.max(1, p.limit)) : cfg.searchLimit;
          const agent = str(p.agent_id).trim() || (cfg.shareExperiences ? "" : str(ctx && ctx.agentId));
          const qs = new URLSearchParams({ q: query, limit: String(limit) });
          if (agent) qs.set("agent_id", agent);
          const r = await callApi({ ...api_, signal }, "GET", "/api/search?" + qs, undefined);
          if (!r.ok) return toolError(`kb_search: ${r.error}`);
          const list = Array.isArray(r.data && r.data.results) ? r.data.results.filter((x) => x && typeof x === "object") : [];
          const rows = list.slice(0, limit).map((x) => ({
            id: str(x.id), title: str(x.title), task: str(x.task), score: Number(x.score), confidence: Number(x.confidence),
          }));
          return text(formatIndex(query, rows), { count: rows.length, results: rows.map(({ id, title, score }) => ({ id, title, score })) });
        } catch (err) {
          return toolError(`kb_search failed: ${str(err && err.message).slice(0, 200)}`);
        }
      },
    }),
    kb_submit: (ctx) => ({
      name: "kb_submit",
      label: "KnowHub submit",
      description: "Submit one experience to KnowHub after you used a tool, resource, API, library or command and know the " +
        "outcome (success or failure): task (what you wanted to do), resource (what you used), result (what happened and what " +
        "to do next time), confidence 0..1. A reviewer approves it before other agents find it. Never include secrets, " +
        "personal data or file contents.",
      parameters: {
        type: "object",
        additionalProperties: false,
        properties: {
          task: { type: "string", description: "what you wanted to do (one line first)" },
          resource: { type: "string", description: "the tool, API, library, command or document used" },
          result: { type: "string", description: "the outcome, and what works or fails" },
          confidence: { type: "number", minimum: 0, maximum: 1, description: "how sure you are (0..1)" },
        },
        required: ["task", "resource", "result"],
      },
      async execute(_id, params, signal) {
        try {
          const p = params && typeof params === "object" ? params : {};
          const body = {};
          for (const k of ["task", "resource", "result"]) {
            const v = str(p[k]).trim();
            if (!v && k !== "resource") return toolError(`kb_submit needs a non-empty ${k}`);
            if (v.length > LIMITS[k]) return toolError(`kb_submit: ${k} has ${v.length} characters, at most ${LIMITS[k]}`);
            body[k] = v;
          }
          if (p.confidence !== undefined && p.confidence !== null) {
            const c = Number(p.confidence);
            if (!Number.isFinite(c) || c < 0 || c > 1) return toolError("kb_submit: confidence must be a number from 0 to 1");
            body.confidence = c;
          }
          if (ctx && typeof ctx.agentId === "string" && ctx.agentId) body.agent_id = ctx.agentId;
          if (cfg.submittedBy) body.submitted_by = cfg.submittedBy;
          body.session_key = keyOf(ctx);
          const r = await callApi({ ...api_, signal }, "POST", "/api/submit", body);
          if (!r.ok) return toolError(`kb_submit: ${r.error}`);
          const id = str(r.data.id);
          const status = str(r.data.status) || "pending";
          if (id) own.add(id);
          const why = status === "pending" ? " (a reviewer approves it before search finds it)"
            : status === "quarantined" ? " (flagged for review: it looked like an instruction to the model)" : "";
          return text(`Submitted to KnowHub as ${id}: ${status}${why}.`, { id, status });
        } catch (err) {
          return toolError(`kb_submit failed: ${str(err && err.message).slice(0, 200)}`);
        }
      },
    }),
    kb_content: () => ({
      name: "kb_content",
      label: "KnowHub content",
      description: "The whole KnowHub experience with this id (task, resource, result, confidence), from kb_search's index.",
      parameters: {
        type: "object",
        additionalProperties: false,
        properties: { id: { type: "string", description: "an id from kb_search" } },
        required: ["id"],
      },
      async execute(_id, params, signal) {
        try {
          const id = str(params && params.id).trim().slice(0, 200);
          if (!id) return toolError("kb_content needs an id");
          const r = await callApi({ ...api_, signal }, "GET", "/api/content/" + encodeURIComponent(id), undefined);
          if (r.status === 404) return toolError(`KnowHub has no experience ${JSON.stringify(id)}`);
          if (!r.ok) return toolError(`kb_content: ${r.error}`);
          const exp = r.data && typeof r.data === "object" ? r.data : {};
          const status = str(exp.status) || "unknown";
          const full = { id: str(exp.id) || id, task: str(exp.task), resource: str(exp.resource), result: str(exp.result),
                         confidence: Number(exp.confidence), status };
          if (status === "quarantined" || status === "rejected") {
            return text(`KnowHub experience ${JSON.stringify(full.id)} is ${status}; its text is withheld.`, { id: full.id, status });
          }
          if (status !== "approved" && cfg.requireApproval && !own.has(full.id)) {
            return text(`KnowHub experience ${JSON.stringify(full.id)} is ${status}: its text is shown once a reviewer approves it.`,
                        { id: full.id, status });
          }
          return text(formatExperience(full), { id: full.id, status });
        } catch (err) {
          return toolError(`kb_content failed: ${str(err && err.message).slice(0, 200)}`);
        }
      },
    }),
  };
  for (const name of TOOL_NAMES) api.registerTool((ctx) => tools[name](ctx || {}), { name });

  // ------------------------------------------------------------------ hooks
  // A heartbeat turn is OpenClaw polling itself, not a task: no reminder, no count, no log, no extraction.
  const heartbeat = (ctx) => Boolean(ctx && ctx.trigger === "heartbeat");

  // Memory stubs (docs/stubs-live.md): the archived sections whose stubs match the prompt, from
  // POST /api/stubs/match, within STUBS_MATCH_MS (at most timeoutMs); the channel is the conversation
  // (sessionKey) or, with stubsChannel "channel", ctx.channelId (else the sessionKey); a subagent's
  // session (":subagent:" in its key) gets none. Any failure (409 when the server matches no stubs, 404
  // from a server without the route, a timeout, an error) is no context: logged once per cause (info for
  // 409/404, which also pause the asking for STUBS_OFF_MS; warn otherwise), never thrown.
  let stubsOffUntil = 0;
  let stubsSaid = "";
  const stubsContext = async (event, ctx) => {
    const prompt = str(event && event.prompt);
    if (!cfg.stubsMatch || !prompt.trim() || Date.now() < stubsOffUntil) return "";
    const session = keyOf(ctx);
    const channelId = str(ctx && (ctx.channelId || ctx.messageProvider));
    const body = { prompt: prompt.slice(0, 100000), channel: (cfg.stubsChannel === "channel" && channelId ? channelId : session).slice(0, 200),
                   subagent: session.includes(":subagent:") };
    const runId = str(ctx && ctx.runId);
    if (runId) body.message_id = runId.slice(0, 200); // one user message per run: a repeated prompt build is the same message
    const r = await callApi({ ...api_, timeoutMs: Math.min(cfg.timeoutMs, STUBS_MATCH_MS) }, "POST", "/api/stubs/match", body);
    if (r.ok) {
      stubsSaid = "";
      return typeof r.data.prependContext === "string" ? r.data.prependContext : "";
    }
    const off = r.status === 409 || r.status === 404; // the server matches no stubs (or predates the route): not an error
    if (off) stubsOffUntil = Date.now() + STUBS_OFF_MS;
    if (r.error !== stubsSaid) {
      stubsSaid = r.error;
      (off ? info : warn)(`memory stubs: no context (${r.error})`);
    }
    return "";
  };

  api.on("before_prompt_build", async (event, ctx) => {
    try {
      if (heartbeat(ctx)) return undefined;
      const key = keyOf(ctx);
      const { call, start, periodic } = counter.next(key);
      const out = {};
      const prepend = [];
      if (start && kinds.start) {
        record("before_agent_start", ctx, {});
        prepend.push(START_REMINDER);
      }
      if (kinds.periodic) {
        record("before_prompt_build", ctx, { llmCall: call });
        if (periodic) prepend.push(PERIODIC_REMINDER);
      }
      let stubs = "";
      try {
        stubs = await stubsContext(event, ctx);
      } catch (err) {
        warn(`memory stubs: no context (${str(err && err.message).slice(0, 200)})`);
      }
      if (stubs) prepend.push(stubs);
      if (prepend.length) out.prependContext = prepend.join("\n");
      if (cfg.reminderMode !== "off") out.appendSystemContext = GUIDANCE;
      return Object.keys(out).length ? out : undefined;
    } catch (err) {
      warn(`before_prompt_build: ${str(err && err.message).slice(0, 200)}`);
      return undefined;
    }
  });

  api.on("after_tool_call", (event, ctx) => {
    try {
      const name = str(event && event.toolName) || str(ctx && ctx.toolName);
      // this plugin's own calls are recorded by the API they went through (one search, one submission)
      if (!name || /(^|__|[./:])kb[_-](search|submit|content)$/i.test(name)) return;
      const ev = { toolName: name.slice(0, 200) };
      const callId = str((event && event.toolCallId) || (ctx && ctx.toolCallId));
      if (callId) ev.toolCallId = callId.slice(0, 200);
      if (Number.isFinite(event && event.durationMs)) ev.durationMs = event.durationMs;
      if (event && event.error) ev.failed = true;
      record("after_tool_call", ctx, ev);
    } catch (err) {
      warn(`after_tool_call: ${str(err && err.message).slice(0, 200)}`);
    }
  });

  api.on("agent_end", (event, ctx) => {
    try {
      if (heartbeat(ctx)) return;
      const key = keyOf(ctx);
      counter.end(key);
      const ev = { success: Boolean(event && event.success) };
      if (Number.isFinite(event && event.durationMs)) ev.durationMs = event.durationMs;
      record("agent_end", ctx, ev); // no messages: extraction is this plugin's to start, and only when enabled
      if (!cfg.enableServerExtraction) return;
      const agentId = ctx && typeof ctx.agentId === "string" ? ctx.agentId : "";
      const source = event && event.messages;
      // redaction and the request both run after the hook has returned (the next turn of the event loop)
      background(new Promise((resolve) => setImmediate(resolve)).then(async () => {
        const { messages } = extractMessages(source, cfg.privacyMode);
        if (!messages.length) return;
        const body = { session_key: key, messages };
        if (agentId) body.agent_id = agentId;
        if (cfg.submittedBy) body.submitted_by = cfg.submittedBy;
        const r = await callApi({ ...api_, timeoutMs: Math.max(cfg.timeoutMs, 15000) }, "POST", "/api/extract", body);
        if (r.ok) info(`extraction requested (${str(r.data && r.data.request_id)}, ${messages.length} messages)`);
        else warn(`extraction not requested: ${r.error}`);
      }).catch((err) => warn(`extraction not requested: ${str(err && err.message).slice(0, 200)}`)));
    } catch (err) {
      warn(`agent_end: ${str(err && err.message).slice(0, 200)}`);
    }
  });

  if (typeof api.registerService === "function") {
    api.registerService({
      id: PLUGIN_ID,
      start: () => info(`KnowHub at ${cfg.apiBase || "(not configured)"}, reminders: ${cfg.reminderMode}, extraction: ` +
        `${cfg.enableServerExtraction ? "on (" + cfg.privacyMode + ")" : "off"}`),
      stop: async () => {
        const deadline = Date.now() + STOP_FLUSH_MS;
        const left = () => Math.max(0, deadline - Date.now());
        await Promise.race([Promise.allSettled([...pending]), new Promise((r) => setTimeout(r, left()).unref?.())]);
        if (poster && !(await poster.drain(left()))) warn(`${poster.queue.length} hook event(s) not delivered before stop`);
      },
    });
  }
}

const plugin = {
  id: PLUGIN_ID,
  name: "hivestream KnowHub",
  description: "KnowHub tools (kb_search, kb_submit, kb_content) and reminders, backed by hivestream",
  register,
};

export default plugin;
