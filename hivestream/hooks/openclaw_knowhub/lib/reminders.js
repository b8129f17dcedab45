// The seed's reminder cadence (knowhub-openclaw-integration.zh.md, MVP 1–2 and 状态清理): one
// reminder when a task starts, one on every third LLM call of a session, the count cleared at
// agent_end. Today's hooks: the first before_prompt_build of a run (the first since the session's
// last agent_end) is the task's start (before_agent_start is legacy); every before_prompt_build
// is one LLM call. hivestream rebuilds the same counter from the plugin log
// (streams/experiences/fold.py, REMIND_EVERY); the two must stay equal.

export const REMIND_EVERY = 3;

// Most sessions counted at once; past it the oldest session's count is dropped (a session that
// never reaches agent_end must not grow the map without end).
export const MAX_SESSIONS = 10000;

export class ReminderCounter {
  constructor(maxSessions = MAX_SESSIONS) {
    this.calls = new Map();
    this.maxSessions = maxSessions;
  }

  // One before_prompt_build of `sessionKey`: { call (1-based since the last agent_end), start, periodic }.
  next(sessionKey) {
    const call = (this.calls.get(sessionKey) ?? 0) + 1;
    this.calls.delete(sessionKey);
    this.calls.set(sessionKey, call);
    if (this.calls.size > this.maxSessions) this.calls.delete(this.calls.keys().next().value);
    return { call, start: call === 1, periodic: call % REMIND_EVERY === 0 };
  }

  // agent_end of `sessionKey`: its count starts again.
  end(sessionKey) {
    this.calls.delete(sessionKey);
  }
}

// Which reminders `mode` (the reminderMode option) lets through: both | start | periodic | off.
export function reminderKinds(mode) {
  return { start: mode === "both" || mode === "start", periodic: mode === "both" || mode === "periodic" };
}
