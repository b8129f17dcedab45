"""Named analytics queries over the KnowHub tables (``hivestream kb query NAME``). Days are UTC."""

from __future__ import annotations

from projections.named_query import NamedQuery

_DAY = "strftime(to_timestamp(event_time_ms / 1000) AT TIME ZONE 'UTC', '%Y-%m-%d')"

MEMORY_USE_SQL = """SELECT agent_id,
       count(*) FILTER (WHERE kind = 'search') AS searches,
       round(count(*) FILTER (WHERE kind = 'search' AND hit_count = 0) / nullif(count(*) FILTER (WHERE kind = 'search'), 0), 3)
           AS search_zero_hit_rate,
       count(*) FILTER (WHERE kind = 'content') AS content_fetches,
       count(*) FILTER (WHERE kind = 'recall') AS recalls,
       round(count(*) FILTER (WHERE kind = 'recall' AND hit_count = 0) / nullif(count(*) FILTER (WHERE kind = 'recall'), 0), 3)
           AS recall_zero_hit_rate
FROM kb_telemetry WHERE kind IN ('search', 'content', 'recall') GROUP BY agent_id ORDER BY searches + recalls DESC, agent_id"""
"""Searches, content fetches and recalls per agent (``kb_telemetry``: the agent API's and the runtimes' hooks')."""

SUBMIT_TO_APPROVAL_SQL = """SELECT count(*) AS approved,
       round(median((reviewed_at_ms - first_seen_ms) / 60000.0), 1) AS median_min,
       round(quantile_cont((reviewed_at_ms - first_seen_ms) / 60000.0, 0.9), 1) AS p90_min,
       round(max((reviewed_at_ms - first_seen_ms) / 60000.0), 1) AS max_min
FROM experiences WHERE status = 'approved' AND reviewed_at_ms IS NOT NULL"""
"""How long approved experiences waited for their approval."""

KB_QUERIES: dict[str, NamedQuery] = {
    q.name: q
    for q in [
        NamedQuery(
            "submissions-per-agent",
            "submissions and extractions per agent per day, with how many joined an existing experience",
            f"""SELECT {_DAY} AS day, agent_id, kind, count(*) AS submissions, count(*) FILTER (WHERE is_duplicate) AS joined_existing
                FROM experience_submissions GROUP BY ALL ORDER BY day, agent_id, kind""",
        ),
        NamedQuery(
            "approval-rate",
            "reviewed experiences approved vs rejected, per origin (submitted / extracted)",
            """SELECT origin, count(*) FILTER (WHERE status IN ('approved', 'rejected') AND reviewer IS NOT NULL) AS reviewed,
                      count(*) FILTER (WHERE status = 'approved' AND reviewer IS NOT NULL) AS approved,
                      count(*) FILTER (WHERE status = 'rejected') AS rejected,
                      round(count(*) FILTER (WHERE status = 'approved' AND reviewer IS NOT NULL)
                            / nullif(count(*) FILTER (WHERE reviewer IS NOT NULL), 0), 3) AS approval_rate
               FROM experiences GROUP BY origin ORDER BY origin""",
        ),
        NamedQuery(
            "time-to-review",
            "time from first submission to the latest review decision, per decision (minutes)",
            """SELECT status AS decision, count(*) AS experiences,
                      round(median((reviewed_at_ms - first_seen_ms) / 60000.0), 1) AS median_min,
                      round(max((reviewed_at_ms - first_seen_ms) / 60000.0), 1) AS max_min
               FROM experiences WHERE reviewed_at_ms IS NOT NULL GROUP BY status ORDER BY status""",
        ),
        NamedQuery(
            "quarantine-rate",
            "experiences flagged for prompt injection, per origin, with the rules that fired",
            """SELECT origin, count(*) AS experiences, count(*) FILTER (WHERE injection_flag) AS flagged,
                      round(count(*) FILTER (WHERE injection_flag) / count(*), 3) AS quarantine_rate,
                      list_sort(list_distinct(flatten(list(injection_rules)))) AS rules
               FROM experiences GROUP BY origin ORDER BY origin""",
        ),
        NamedQuery(
            "redactions-per-kind",
            "privacy redactions per kind (strict mode) over every submission",
            """SELECT kind, sum(n) AS replacements, count(DISTINCT event_id) AS submissions
               FROM experience_redactions GROUP BY kind ORDER BY replacements DESC, kind""",
        ),
        NamedQuery(
            "reminder-conversion",
            "per session: reminders injected and submissions after the first reminder (conversion = sessions with both)",
            """WITH r AS (SELECT session_key, count(*) AS reminders, min(event_time_ms) AS first_reminder
                          FROM kb_telemetry WHERE kind = 'reminder' GROUP BY session_key),
                    s AS (SELECT session_key, event_time_ms FROM experience_submissions WHERE kind = 'submitted')
               SELECT r.session_key, r.reminders, count(s.event_time_ms) FILTER (WHERE s.event_time_ms >= r.first_reminder) AS submissions_after,
                      count(s.event_time_ms) FILTER (WHERE s.event_time_ms >= r.first_reminder) > 0 AS converted
               FROM r LEFT JOIN s USING (session_key) GROUP BY ALL ORDER BY r.session_key""",
        ),
        NamedQuery(
            "zero-hit-searches",
            "kb_search calls that found nothing, by query",
            """SELECT query, count(*) AS searches, count(DISTINCT agent_id) AS agents, max(event_time_ms) AS last_ms
               FROM kb_telemetry WHERE kind = 'search' AND hit_count = 0 GROUP BY query ORDER BY searches DESC, query""",
        ),
        NamedQuery(
            "memory-use-per-agent",
            "per agent: knowledge-base searches, the share that found nothing, content fetches and frames recalls",
            MEMORY_USE_SQL,
        ),
        NamedQuery(
            "submit-to-approval",
            "approved experiences: minutes from the first submission to the approval (median, 90th percentile, longest)",
            SUBMIT_TO_APPROVAL_SQL,
        ),
        NamedQuery(
            "dead-letters",
            "rejected kb calls and failed extractions per reason (details redacted in strict mode)",
            """SELECT reason, count(*) AS records, min(detail) AS example FROM kb_dead_letters GROUP BY reason ORDER BY records DESC, reason""",
        ),
    ]
}

_ROWS = "experience_id AS id, origin, submit_count AS count, agent_ids AS agents, confidence, task, resource, result, injection_rules AS rules"

KB_REVIEW_QUERIES: dict[str, NamedQuery] = {
    q.name: q
    for q in [
        NamedQuery("pending", "experiences waiting for review, oldest first (kb pending)",
                   f"SELECT {_ROWS} FROM experiences WHERE status = 'pending' ORDER BY first_seen_ms, experience_id"),
        NamedQuery("quarantined", "experiences flagged for prompt injection, oldest first (kb pending --quarantined)",
                   f"SELECT {_ROWS} FROM experiences WHERE status = 'quarantined' ORDER BY first_seen_ms, experience_id"),
        NamedQuery("experience-ids", "every experience id (kb approve|reject resolve a prefix against them)",
                   "SELECT experience_id FROM experiences ORDER BY experience_id"),
        NamedQuery("search-docs", "every experience as kb search ranks it",
                   "SELECT experience_id, task, resource, result, status, agent_ids FROM experiences ORDER BY experience_id"),
        NamedQuery("experience-count", "how many experiences there are (kb submit|approve|reject wait on serve with it)",
                   "SELECT count(*) AS experiences FROM experiences"),
    ]
}
"""The queries behind ``kb pending``, ``kb search`` and the id lookup of ``kb approve|reject``, by
name, so the serve holding the file can answer them (its read routes run named queries only)."""
