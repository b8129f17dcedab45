// A minimal OpenClaw plugin host for the tests: loads a plugin directory the way OpenClaw does and
// drives its hooks and tools through a scripted scenario. OpenClaw itself needs Node >= 22.22 (its
// loader and SDK), newer than this machine's Node 20, so the tests use this stand-in; it follows
// OpenClaw's contract as its sources state it (src/plugins/loader: the manifest openclaw.plugin.json
// with id and an inline configSchema whose defaults are applied; package.json openclaw.extensions
// names the entry; the module's default export is register(api) or an object with register; every
// tool registered with api.registerTool must be listed in contracts.tools; hook handlers are
// (event, ctx) with PluginHookAgentContext / PluginHookToolContext; before_prompt_build results'
// prependContext / appendSystemContext are concatenated; agent_end is fire-and-forget).
//
// Usage: node openclaw_host.mjs PLUGIN_DIR SCENARIO.json  → one JSON report on stdout.
// Scenario: {"config": {...}, "steps": [
//   {"op": "llm", "session", "agent", "run", "trigger"?, "prompt"?, "channel"? (ctx.channelId)} | {"op": "tool", "session", "agent", "run", "name", "params", "id"} |
//     (a param "$id:CALL" is the id an earlier tool call CALL answered in its details: an id the server chose) |
//   {"op": "after_tool", "session", "agent", "run", "name", "id"} (another plugin's tool: after_tool_call only) |
//   {"op": "end", "session", "agent", "run", "messages", "success"} | {"op": "stop"}]}

import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [dir, scenarioPath] = process.argv.slice(2);
const order = []; // what happened, in order: hook returns, fetch starts and settles
const realFetch = globalThis.fetch;
globalThis.fetch = async (url, init) => {
  const path = new URL(String(url)).pathname;
  order.push(`fetch-start ${init?.method || "GET"} ${path}`);
  try {
    return await realFetch(url, init);
  } finally {
    order.push(`fetch-settled ${init?.method || "GET"} ${path}`);
  }
};

function fail(msg) {
  process.stdout.write(JSON.stringify({ error: msg }) + "\n");
  process.exit(3);
}

const manifest = JSON.parse(await readFile(join(dir, "openclaw.plugin.json"), "utf8"));
if (typeof manifest.id !== "string" || !manifest.id) fail("manifest has no id");
const schema = manifest.configSchema;
if (!schema || typeof schema !== "object" || Array.isArray(schema)) fail("manifest has no inline configSchema object");
const pkg = JSON.parse(await readFile(join(dir, "package.json"), "utf8"));
const entry = pkg?.openclaw?.extensions?.[0];
if (typeof entry !== "string") fail("package.json has no openclaw.extensions entry");

const scenario = JSON.parse(await readFile(scenarioPath, "utf8"));
const given = scenario.config || {};
for (const k of Object.keys(given)) {
  if (schema.additionalProperties === false && !(k in (schema.properties || {}))) fail(`config key ${k} is not in configSchema`);
}
const pluginConfig = {};
for (const [k, p] of Object.entries(schema.properties || {})) if ("default" in p) pluginConfig[k] = p.default;
Object.assign(pluginConfig, given);

const mod = await import(pathToFileURL(join(dir, entry)).href);
let def = mod;
while (def && typeof def === "object" && "default" in def && typeof def.register !== "function") def = def.default;
const registerFn = typeof def === "function" ? def : def && def.register;
if (typeof registerFn !== "function") fail("the entry exports no register(api)");

const handlers = {};
const tools = [];
const services = [];
const logs = [];
const api = {
  id: manifest.id,
  name: manifest.name,
  pluginConfig,
  config: {},
  logger: {
    debug: (m) => logs.push(["debug", m]),
    info: (m) => logs.push(["info", m]),
    warn: (m) => logs.push(["warn", m]),
    error: (m) => logs.push(["error", m]),
  },
  resolvePath: (p) => p,
  registerTool: (tool, opts) => tools.push({ tool, opts: opts || {} }),
  registerService: (s) => services.push(s),
  on: (name, fn) => (handlers[name] ||= []).push(fn),
};
registerFn.call(def, api);
for (const s of services) await s.start?.();

function toolFor(name, ctx) {
  for (const { tool, opts } of tools) {
    const names = opts.names || (opts.name ? [opts.name] : []);
    if (typeof tool === "function") {
      if (names.length && !names.includes(name)) continue;
      const made = tool(ctx);
      for (const t of [made].flat()) if (t && t.name === name) return t;
    } else if (tool && tool.name === name) return tool;
  }
  return null;
}

const registered = tools.flatMap(({ tool, opts }) =>
  typeof tool === "function" ? opts.names || (opts.name ? [opts.name] : [].concat(tool({})).map((t) => t.name)) : [tool.name]);
const declared = manifest?.contracts?.tools || [];
if ([...registered].sort().join() !== [...declared].sort().join()) fail(`tools ${registered} != contracts.tools ${declared}`);
for (const n of registered) {
  const t = toolFor(n, {});
  if (!t || typeof t.execute !== "function" || !t.parameters || typeof t.parameters !== "object" || !t.description) {
    fail(`tool ${n} lacks execute, parameters or description`);
  }
}

const agentCtx = (s) => ({ agentId: s.agent, sessionKey: s.session, sessionId: `sid-${s.session}`, runId: s.run, trigger: s.trigger || "user",
                           workspaceDir: "/work/agent", ...(s.channel ? { channelId: s.channel } : {}) });
const calls = {}; // session -> llm calls in the current run
const injections = [];
const toolResults = [];
const threw = [];
const started = Date.now();

for (const step of scenario.steps) {
  const ctx = agentCtx(step);
  if (step.op === "llm") {
    const n = (calls[step.session] = (calls[step.session] || 0) + 1);
    let prepend = [];
    let system = [];
    for (const fn of handlers.before_prompt_build || []) {
      try {
        const r = await fn({ prompt: step.prompt ?? `step ${n} of ${step.run}`, messages: [] }, ctx);
        if (r && r.prependContext) prepend.push(r.prependContext);
        if (r && r.appendSystemContext) system.push(r.appendSystemContext);
      } catch (e) {
        threw.push(`before_prompt_build: ${e}`);
      }
    }
    order.push(`before_prompt_build-returned ${step.session} ${n}`);
    const text = prepend.join("\n\n");
    const kinds = [...text.matchAll(/<knowhub-reminder kind="(\w+)">/g)].map((m) => m[1]);
    injections.push({ session: step.session, run: step.run, call: n, kinds, prepend: text, system: system.join("\n\n") });
  } else if (step.op === "tool") {
    const tctx = { agentId: step.agent, sessionKey: step.session, sessionId: `sid-${step.session}` };
    const tool = toolFor(step.name, tctx);
    const earlier = (v) => typeof v === "string" && v.startsWith("$id:") ? toolResults.find((r) => r.id === v.slice(4))?.details?.id ?? v : v;
    const params = Object.fromEntries(Object.entries(step.params || {}).map(([k, v]) => [k, earlier(v)]));
    let result = null;
    const t0 = Date.now();
    try {
      result = await tool.execute(step.id, params, AbortSignal.timeout(30000));
    } catch (e) {
      threw.push(`${step.name}: ${e}`);
    }
    toolResults.push({ name: step.name, id: step.id, text: result?.content?.map((c) => c.text).join("\n") ?? null, details: result?.details ?? null });
    const ev = { toolName: step.name, params, runId: step.run, toolCallId: step.id, result, durationMs: Date.now() - t0 };
    for (const fn of handlers.after_tool_call || []) {
      try {
        await fn(ev, { ...tctx, runId: step.run, toolName: step.name, toolCallId: step.id });
      } catch (e) {
        threw.push(`after_tool_call: ${e}`);
      }
    }
  } else if (step.op === "after_tool") {
    const ev = { toolName: step.name, params: {}, runId: step.run, toolCallId: step.id, result: { ok: true }, durationMs: 5 };
    for (const fn of handlers.after_tool_call || []) {
      try {
        await fn(ev, { agentId: step.agent, sessionKey: step.session, runId: step.run, toolName: step.name, toolCallId: step.id });
      } catch (e) {
        threw.push(`after_tool_call: ${e}`);
      }
    }
  } else if (step.op === "end") {
    calls[step.session] = 0;
    for (const fn of handlers.agent_end || []) {
      try {
        await fn({ runId: step.run, messages: step.messages || [], success: step.success !== false, durationMs: 1000 }, ctx);
      } catch (e) {
        threw.push(`agent_end: ${e}`);
      }
    }
    order.push(`agent_end-resolved ${step.session}`);
  } else if (step.op === "stop") {
    for (const s of services) await s.stop?.();
    order.push("stopped");
  }
}

process.stdout.write(JSON.stringify({ plugin: manifest.id, tools: registered, hooks: Object.keys(handlers).sort(), injections, toolResults,
                                      threw, order, logs, elapsedMs: Date.now() - started }) + "\n");
