"""``hivestream kb``: the KnowHub knowledge base — run, project, submit, review, search, query.

Review and submission commands *produce events*; the projection changes when they are applied:
on a file a running ``hivestream serve`` holds they go through that serve (its note ``<db>.serve``;
a review with its review token) into its log, applied by its loop; on a file no serve holds they
are appended to the event log next to the database (``<db>.kb-events.jsonl``, replayable with
``kb run``; :mod:`hivestream.embedded.experience_log`) and applied at once; with ``--kafka`` they are
produced to ``<ns>.experience-events`` and applied by ``kb project``. ``pending``, ``search`` and
the id lookup of ``approve|reject`` ask the serve holding the file when one does (else the file,
or its snapshot with a line saying so). User mistakes print one line on stderr and exit with code 2.
"""

from __future__ import annotations

import getpass
import json
import sys
import time
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import duckdb
import typer
from pydantic import ValidationError
from rich.console import Console
from rich.text import Text

from hivestream.cli.console import print_named_query, table
from hivestream.cli.kafka_opts import (
    BootstrapOpt,
    KafkaConfigOpt,
    NamespaceOpt,
    PartitionsOpt,
    ReplicationOpt,
    create_topics,
    kafka_connection,
    kafka_settings,
    stop_on_signals,
)
from hivestream.embedded.experience_log import event_log
from projections.experiences.queries import KB_QUERIES, KB_REVIEW_QUERIES
from projections.reading import open_for_reading
from streams.experiences.events import ExperienceEvent
from streams.experiences.settings import ExperienceSettings
from streams.model.deadletter import RejectedInput

if TYPE_CHECKING:
    pass

# streams.experiences.build (the injection and redaction tables) and streams.experiences.search
# (bm25s, numpy) are imported by the commands that use them: together ~0.4 s of every command's start-up

kb_app = typer.Typer(help="KnowHub experiences: run, project, submit, review, search, analytics.", no_args_is_help=True,
                     pretty_exceptions_enable=False)
out = Console(width=max(100, Console().width))
err = Console(stderr=True, width=200)

DbOpt = Annotated[Path, typer.Option("--db", help="DuckDB file")]
KafkaOpt = Annotated[bool, typer.Option("--kafka", help="produce the event to Kafka instead of the embedded event log")]


class SearchFormat(StrEnum):
    """Output formats of ``kb search``."""

    TABLE = "table"
    JSON = "json"
    PROMPT = "prompt"


def _fail(message: str) -> NoReturn:
    err.print(Text.assemble(("error: ", "red"), message), soft_wrap=True)
    raise typer.Exit(2)


def _read(db: Path, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
    try:
        con, _fresh = open_for_reading(db)
    except FileNotFoundError as e:
        _fail(str(e))
    try:
        return con.execute(sql, params or []).fetchall()
    except duckdb.CatalogException:
        _fail(f"{db} holds no KnowHub projection (run `hivestream kb run` or `hivestream kb project` first)")
    finally:
        con.close()


def _named(db: Path, name: str, *, stale_only: bool = False) -> list[tuple[Any, ...]]:
    """The rows of the named query of :data:`KB_REVIEW_QUERIES`: from the serve holding ``db`` when
    one does, else from the file or its snapshot; the freshness line goes to stderr (with
    ``stale_only``: only when a snapshot answered)."""
    from hivestream.serve.read_client import ServedQueryFailed, read_named

    try:
        _cols, rows, freshness = read_named(db, "kb-review", KB_REVIEW_QUERIES, name)
    except FileNotFoundError as e:
        _fail(str(e))
    except (ServedQueryFailed, duckdb.Error):
        _fail(f"{db} holds no KnowHub projection (run `hivestream kb run` or `hivestream kb project` first)")
    if not stale_only or "snapshot" in freshness:
        err.print(Text.assemble(("note: ", "yellow"), freshness) if "snapshot" in freshness else Text(freshness), soft_wrap=True)
    return rows


def _emit(ev: ExperienceEvent, db: Path, kafka: bool, bootstrap: str | None, namespace: str | None, kafka_config: Path | None = None) -> str:
    """Produce ``ev`` to Kafka, or send it through the serve holding ``db``, or append it to ``db``'s
    own event log (:mod:`hivestream.services.emit`); returns where it went (exits 2 with one line when it went nowhere)."""
    from hivestream.services.emit import NotEmitted, emit_to_file, emit_to_kafka

    if kafka:
        from streams.kafka.topics import Topics

        s = kafka_settings(namespace, None)
        conn = kafka_connection(bootstrap, kafka_config)
        t = Topics(s.topic_namespace)
        create_topics(conn, s, t.specs(s.partitions))
        return emit_to_kafka(ev, conn, t).where
    try:
        done = emit_to_file(ev, db)
    except NotEmitted as e:
        _fail(str(e))
    if done.note:
        err.print(Text.assemble(("note: ", "yellow"), done.note), soft_wrap=True)
    return done.where


@kb_app.command()
def run(
    files: Annotated[list[Path], typer.Argument(help="hook-event JSONL files or directories of them (and KnowHub event lines), in order")],
    db: DbOpt = Path("hivestream.duckdb"),
) -> None:
    """Embedded: derive KnowHub events from hook-event files and project them (extraction when HIVESTREAM_KB_EXTRACTION_ENABLED=1)."""
    from hivestream.cli.inputs import missing
    from hivestream.embedded.experiences import run_kb_files
    from streams.experiences.extract import ChatClient

    if (problem := missing(files)) is not None:
        _fail(problem)

    s = ExperienceSettings()
    try:
        client = ChatClient(s.extraction_base_url, s.extraction_model, s.extraction_api_key, s.extraction_timeout_s) if s.extraction_enabled else None
    except ValueError as e:
        _fail(f"extraction endpoint refused: {e}")
    from hivestream.cli.inputs import expand_jsonl
    from streams.ingest.hook_log import is_log_dir

    if any(is_log_dir(f) for f in files):  # a serve log: the KnowHub tables serve writes of it
        _run_logs(files, db, s, client)
        return
    paths, skipped = expand_jsonl(files)
    if skipped:
        err.print(Text.assemble(("note: ", "yellow"), f"skipped {len(skipped)} files that are not .jsonl: " + ", ".join(map(str, skipped[:5]))), soft_wrap=True)
    if not paths:
        _fail("no .jsonl files in " + ", ".join(map(str, files)))
    try:
        rep = run_kb_files(paths, db, s, completer=client)
    except duckdb.IOException as e:
        _fail(f"cannot open {db}: {e}")
    finally:
        if client is not None:
            client.close()
    ev = ", ".join(f"{k} {v}" for k, v in sorted(rep.events.items())) or "none"
    dl = ", ".join(f"{k} {v}" for k, v in rep.dead_letters.most_common()) or "none"
    out.print(f"read {rep.lines} lines ({rep.skipped} already applied); KnowHub events: {ev}; extraction requests: {rep.extraction_requests}; "
              f"dead-lettered: {dl}; privacy mode {s.privacy_mode}; DuckDB file: {db}", soft_wrap=True)
    _print_status(db)


def _run_logs(dirs: list[Path], db: Path, s: ExperienceSettings, client: Any) -> None:
    from hivestream.embedded.log_run import run_kb_log
    from streams.ingest.hook_log import is_log_dir

    if not all(is_log_dir(d) for d in dirs):
        if client is not None:
            client.close()
        _fail("run a serve log on its own (not mixed with files)")
    try:
        for d in dirs:
            rep = run_kb_log(d, db, s, completer=client, on_skip=lambda line: err.print(Text.assemble(("note: ", "yellow"), line)))
            ev = ", ".join(f"{k} {v}" for k, v in sorted(rep.events.items())) or "none"
            out.print(f"read {rep.lines} records of the serve log {d} ({rep.skipped} already applied); KnowHub events: {ev}; "
                      f"DuckDB file: {db}", soft_wrap=True)
    except (ValueError, duckdb.IOException) as e:
        _fail(f"{e}")
    finally:
        if client is not None:
            client.close()
    _print_status(db)


def _print_status(db: Path) -> None:
    rows = _read(db, "SELECT status, count(*), sum(submit_count) FROM experiences GROUP BY status ORDER BY status")
    out.print(table("experiences", ["status", "experiences", "submissions"], rows))


@kb_app.command()
def project(
    db: DbOpt = Path("hivestream.duckdb"),
    bootstrap: BootstrapOpt = None,
    kafka_config: KafkaConfigOpt = None,
    namespace: NamespaceOpt = None,
    partitions: PartitionsOpt = None,
    replication_factor: ReplicationOpt = None,
    idle_exit_s: Annotated[float | None, typer.Option("--idle-exit", help="stop after this many seconds without records")] = None,
    until_caught_up: Annotated[bool, typer.Option("--until-caught-up", help="stop at the end offsets seen at start")] = False,
    snapshot_every_s: Annotated[float, typer.Option("--snapshot-every", help="seconds between published snapshots (the agent API "
                                                    "of `ingest --db` reads them; 0: none)")] = 2.0,
) -> None:
    """Kafka: project experience-events and kb-dead-letter into the KnowHub tables (one transaction per batch with the offsets)."""
    from projections.experiences.projection import ExperienceProjection
    from projections.experiences.projector import ExperienceProjector
    from streams.kafka.topics import Topics

    s = kafka_settings(namespace, partitions, replication_factor=replication_factor)
    conn = kafka_connection(bootstrap, kafka_config)
    t = Topics(s.topic_namespace)
    create_topics(conn, s, t.specs(s.partitions))
    should_stop = stop_on_signals()
    try:
        sink = ExperienceProjection(db)
    except duckdb.IOException as e:
        _fail(f"cannot open {db}: {e}")
    try:
        proj = ExperienceProjector(sink, conn, t.experience_events, t.kb_dead_letter, ExperienceSettings(), snapshot_every_s=max(0.0, snapshot_every_s))
        try:
            rep = proj.run(until_caught_up=until_caught_up, idle_exit_s=idle_exit_s, should_stop=should_stop)
        finally:
            proj.close()
    finally:
        sink.close()
    out.print(f"projected {rep.records} records in {rep.batches} batches: {rep.submissions} submissions, {rep.reviews} reviews, "
              f"{rep.telemetry} telemetry rows, {rep.dead_letters} dead letters into {db}")


@kb_app.command()
def submit(
    task: Annotated[str, typer.Option("--task", help="what was done")],
    result: Annotated[str, typer.Option("--result", help="what came of it")],
    resource: Annotated[str, typer.Option("--resource", help="tools, files, settings used")] = "",
    confidence: Annotated[float | None, typer.Option("--confidence", help="0..1")] = None,
    agent_id: Annotated[str, typer.Option("--agent-id")] = "cli",
    submitted_by: Annotated[str, typer.Option("--submitted-by")] = "",
    db: DbOpt = Path("hivestream.duckdb"),
    kafka: KafkaOpt = False,
    bootstrap: BootstrapOpt = None,
    kafka_config: KafkaConfigOpt = None,
    namespace: NamespaceOpt = None,
) -> None:
    """Submit an experience directly (redacted, checked for prompt injection, deduplicated like any other)."""
    from hivestream.services.experiences import submission

    fields: dict[str, Any] = {"task": task, "resource": resource, "result": result, "confidence": confidence}
    try:
        ev = submission(fields, ExperienceSettings(), agent_id=agent_id, submitted_by=submitted_by, now_ms=int(time.time() * 1000))
    except RejectedInput as e:
        _fail(f"not submitted: {e.detail}")
    where = _emit(ev, db, kafka, bootstrap, namespace, kafka_config)
    flag = f"; flagged by {', '.join(ev.injection_rules)} (quarantined)" if ev.injection_rules else ""
    red = f"; redacted {sum(ev.redactions.values())}" if ev.redactions else ""
    out.print(f"submitted {ev.event_id} → {where}{red}{flag}", soft_wrap=True)


@kb_app.command()
def pending(
    db: DbOpt = Path("hivestream.duckdb"),
    quarantined: Annotated[bool, typer.Option("--quarantined", help="list quarantined experiences instead")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON rows (full ids and texts) instead of a table")] = False,
) -> None:
    """Experiences waiting for review (or the quarantined ones), oldest first; approve/reject take an id or a unique prefix."""
    status = "quarantined" if quarantined else "pending"
    cols = ["id", "origin", "count", "agents", "confidence", "task", "resource", "result", "rules"]
    rows = _named(db, status)
    if as_json:
        json.dump([dict(zip(cols, r, strict=True)) for r in rows], sys.stdout, default=str, indent=1)
        sys.stdout.write("\n")
        return
    short: list[tuple[object, ...]] = [(i[:12], o, n, ", ".join(a), None if c is None else round(c, 2), t[:50], res[:60], ", ".join(ru))
                                       for i, o, n, a, c, t, _r, res, ru in rows]
    out.print(table(f"{status} experiences ({len(rows)}; ids shortened to a unique-enough prefix, --json for full rows)",
                    ["id", "origin", "count", "agents", "conf", "task", "result", "rules"], short))


def _resolve(db: Path, given: str) -> str:
    """The full id of the experience ``given`` names: the id itself or a unique prefix (as ``kb pending`` prints it)."""
    from hivestream.services.experiences import resolve_id

    found = resolve_id(lambda name: _named(db, name, stale_only=True), given)
    if len(found) == 1:
        return found[0]
    if not found:
        _fail(f"no experience {given!r} in {db} (see `hivestream kb pending --db {db}`)")
    _fail(f"{given!r} names several experiences ({', '.join(found)}, ...): give more of the id")


def _review(experience_id: str, decision: str, reason: str, reviewer: str, db: Path, kafka: bool, bootstrap: str | None, namespace: str | None,
            kafka_config: Path | None) -> None:
    from hivestream.services.experiences import review_event

    if not kafka or db.exists():
        experience_id = _resolve(db, experience_id)
    try:
        ev = review_event(experience_id, decision, reason, reviewer, ExperienceSettings(), int(time.time() * 1000))
    except ValidationError as e:
        _fail(f"invalid review: {e.errors()[0]['loc'][0]}: {e.errors()[0]['msg']}")
    where = _emit(ev, db, kafka, bootstrap, namespace, kafka_config)
    out.print(f"{decision} {experience_id} → {where}")


def _me() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "cli"


@kb_app.command()
def approve(
    experience_id: Annotated[str, typer.Argument(help="the experience id (kb pending)")],
    reason: Annotated[str, typer.Option("--reason")] = "",
    reviewer: Annotated[str | None, typer.Option("--reviewer", help="default: the login name")] = None,
    db: DbOpt = Path("hivestream.duckdb"),
    kafka: KafkaOpt = False,
    bootstrap: BootstrapOpt = None,
    kafka_config: KafkaConfigOpt = None,
    namespace: NamespaceOpt = None,
) -> None:
    """Approve an experience (produces an experience-reviewed event)."""
    _review(experience_id, "approved", reason, reviewer or _me(), db, kafka, bootstrap, namespace, kafka_config)


@kb_app.command()
def reject(
    experience_id: Annotated[str, typer.Argument(help="the experience id (kb pending)")],
    reason: Annotated[str, typer.Option("--reason", help="why (required)")],
    reviewer: Annotated[str | None, typer.Option("--reviewer", help="default: the login name")] = None,
    db: DbOpt = Path("hivestream.duckdb"),
    kafka: KafkaOpt = False,
    bootstrap: BootstrapOpt = None,
    kafka_config: KafkaConfigOpt = None,
    namespace: NamespaceOpt = None,
) -> None:
    """Reject an experience with a reason (produces an experience-reviewed event)."""
    if not reason.strip():
        _fail("--reason must not be empty")
    _review(experience_id, "rejected", reason, reviewer or _me(), db, kafka, bootstrap, namespace, kafka_config)


@kb_app.command("repair-log")
def repair_log(db: DbOpt = Path("hivestream.duckdb")) -> None:
    """Continue <db>.kb-events.jsonl after it was truncated or deleted: blank lines stand for the lines --db applied of it before."""
    from hivestream.embedded.experience_log import continue_log

    if not db.exists():
        _fail(f"no such DuckDB file: {db}")
    try:
        added, applied = continue_log(db)
    except duckdb.IOException as e:
        _fail(f"cannot open {db}: another process holds it; retry when it is done: {str(e).splitlines()[0]}")
    except (duckdb.Error, OSError) as e:
        _fail(f"cannot repair {event_log(db)}: {type(e).__name__}: {str(e).splitlines()[0]}")
    if added:
        out.print(f"continued {event_log(db)}: {added} blank lines stand for the lines lost ({db} had applied {applied}); "
                  f"new events apply from line {applied}", soft_wrap=True)
    else:
        out.print(f"nothing to repair: {event_log(db)} holds every line {db} applied of it ({applied})", soft_wrap=True)


@kb_app.command("search")
def search_cmd(
    query: Annotated[str, typer.Argument(help="what to look for")],
    db: DbOpt = Path("hivestream.duckdb"),
    agent_id: Annotated[str | None, typer.Option("--agent-id", help="only experiences this agent submitted")] = None,
    fmt: Annotated[SearchFormat, typer.Option("--format", help="table, json, or prompt (escaped, marked untrusted)")] = SearchFormat.TABLE,
    k: Annotated[int, typer.Option("-k", help="at most this many results", min=1)] = 5,
    include_quarantined: Annotated[bool, typer.Option("--include-quarantined", help="also search quarantined experiences")] = False,
) -> None:
    """Rank approved experiences by BM25 relevance (quarantined ones only when asked)."""
    from hivestream.services.experiences import search_named
    from streams.experiences.search import format_json, format_prompt

    hits = search_named(lambda name: _named(db, name), query, k=k, agent_id=agent_id, include_quarantined=include_quarantined)
    if fmt is SearchFormat.JSON:
        sys.stdout.write(format_json(hits) + "\n")
    elif fmt is SearchFormat.PROMPT:
        sys.stdout.write(format_prompt(hits) + "\n")
    else:
        rows: list[tuple[object, ...]] = [(h.doc.experience_id, round(h.score, 3), h.doc.status, ", ".join(h.doc.agent_ids), h.doc.task[:60],
                                           h.doc.result[:70]) for h in hits]
        out.print(table(f"kb search: {query}", ["id", "score", "status", "agents", "task", "result"], rows))


@kb_app.command("query")
def query_cmd(
    name: Annotated[str | None, typer.Argument(help="query name; omit to list them")] = None,
    db: DbOpt = Path("hivestream.duckdb"),
    as_json: Annotated[bool, typer.Option("--json", help="print JSON rows instead of a table")] = False,
    list_: Annotated[bool, typer.Option("--list", help="list the named queries (as without a name)")] = False,
) -> None:
    """Run a named KnowHub analytics query (submissions-per-agent, approval-rate, ...)."""
    problem = print_named_query("KnowHub", "kb", KB_QUERIES, None if list_ else name, db, as_json, out, err)
    if problem:
        _fail(problem)
