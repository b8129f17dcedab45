"""The ``hivestream`` command line (typer)."""

from __future__ import annotations

import sys

if sys.argv[1:2] == ["hook"] and sys.argv[0].endswith("hivestream"):  # command hooks start fast: no typer, no duckdb
    from hivestream.hooks.command import main as _hook_main

    sys.exit(_hook_main(sys.argv[2:]))

import contextlib
import json
import os
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import duckdb
import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape

from hivestream.cli import demo_file
from hivestream.cli.console import table
from hivestream.cli.ingest import register as register_ingest
from hivestream.cli.kafka_opts import (
    SERVICE_TOPIC_WAIT_S,
    BootstrapOpt,
    KafkaConfigOpt,
    NamespaceOpt,
    PartitionsOpt,
    ReplicationOpt,
    create_topics,
    input_partitions,
    kafka_connection,
    kafka_settings,
    quiet_client_logs,
    refuse_state_mismatch,
    refuse_unusable_outputs,
    stop_on_signals,
)
from hivestream.cli.kb import kb_app
from hivestream.cli.lag import register as register_lag
from hivestream.cli.mcp import register as register_mcp
from hivestream.cli.serve import register as register_serve
from hivestream.cli.stubs import stubs_app
from hivestream.cli.topics import register as register_topics
from projections.frames.analytics import ANALYTICS_QUERIES, MEMORY_QUERIES
from projections.frames.queries import QUERIES
from projections.named_query import NamedQuery, run_query
from streams.gc_tuning import tune_gc
from streams.importers.ordered_pool import auto_jobs
from streams.kafka.connection import KafkaConnection
from streams.kafka.topics import WORKER_BATCH_BYTES
from streams.model.body_hash import KeyStrategy
from streams.settings import Settings

if TYPE_CHECKING:
    from hivestream.embedded.frames import RunReport

# hivestream.embedded.frames and projections.frames.sink (pyarrow, the runner) are imported by the
# commands that run files: the Kafka commands and `hook` start without them

app = typer.Typer(help="hivestream: dedup AI-agent memory captures into DuckDB projections.", no_args_is_help=True,
                  pretty_exceptions_enable=False)
app.add_typer(stubs_app, name="stubs", help="memory stubs: import stubs.db, match, what-if, queries")
app.add_typer(kb_app, name="kb", help="KnowHub experiences: run, project, submit, review, search, queries")
register_ingest(app)  # ingest, hook, hooks install|uninstall
register_lag(app)
register_topics(app)  # topics [--check]
register_serve(app)  # serve
register_mcp(app)
out = Console(width=max(100, Console().width))
err = Console(stderr=True)

SAMPLES = Path(__file__).parent.parent / "samples"

ALL_QUERIES: dict[str, NamedQuery] = {**QUERIES, **ANALYTICS_QUERIES, **MEMORY_QUERIES}
"""Every query ``hivestream query`` answers: the frame queries, the frame analytics, the memory tool calls."""


class OutputFormat(StrEnum):
    """Output formats of ``hivestream query``."""

    TABLE = "table"
    JSON = "json"
    CSV = "csv"


def _settings(window_ms: int | None, key_strategy: KeyStrategy | None, batch_size: int | None) -> Settings:
    overrides: dict[str, object] = {}
    if window_ms is not None:
        overrides["window_ms"] = window_ms
    if key_strategy is not None:
        overrides["key_strategy"] = key_strategy
    if batch_size is not None:
        overrides["batch_size"] = batch_size
    return Settings(**overrides)  # type: ignore[arg-type]


def print_report(report: RunReport) -> None:
    """Print a run's summary: what came in, frames out, duplicates per source pair, dead letters."""
    fmts: dict[str, int] = {}
    for f in report.inputs.values():
        fmts[f] = fmts.get(f, 0) + 1
    out.print(f"[bold]inputs[/]: {len(report.inputs)} files ({', '.join(f'{n} {k}' for k, n in sorted(fmts.items()))}), "
              f"{report.records} input records read (lines with events or errors), {report.skipped} input items (events or rejected lines) already applied")
    why = ", ".join(f"{k} {v}" for k, v in report.not_turns.most_common())
    out.print(f"[bold]hook events[/]: {report.events} ({report.captures} captures with turn text, {report.not_captures} not turns"
              f"{f' ({why}; table skipped_events)' if why else ''}, {report.events - report.captures - report.not_captures} rejected as captures)")
    out.print(f"[bold]frames out[/]: {report.frames_created}; [bold]duplicates collapsed[/]: {report.duplicates}"
              + (f"; {report.repeated} captures repeated an event id already applied (the same event read twice, "
                 "e.g. a transcript that logs one message again); they change nothing" if report.repeated else ""))
    dl = sum(report.dead_letters.values())
    detail = ", ".join(f"{k} {v}" for k, v in report.dead_letters.most_common())
    out.print(f"[bold]dead-lettered[/]: {dl}" + (f" ({detail})" if detail else ""))
    con = duckdb.connect(report.db, read_only=True)
    try:
        cols, rows = run_query(con, "dedup-summary", QUERIES)
        out.print(table("duplicates collapsed per source pair (whole file)", cols, rows))
    finally:
        con.close()
    out.print(f"[bold]DuckDB file[/]: {Path(report.db).resolve()}  (try: {_self()} query top-frames --db {report.db})")


def ensure_not_held(db: Path) -> None:
    """Exit 2 when a writer (a projector) holds ``db``: a replay must not swap a file under it."""
    if not db.exists():
        return
    try:
        duckdb.connect(str(db)).close()
    except duckdb.IOException as e:
        err.print(f"[red]error:[/] {db} is held by a running writer (stop the projector first): {e}")
        raise typer.Exit(2) from e


def swap_in(new: Path, db: Path) -> None:
    """Atomically replace ``db`` by ``new``; drop the old file's WAL and stale snapshot."""
    from projections.reading import heartbeat_path, snapshot_path

    ensure_not_held(db)
    Path(f"{db}.wal").unlink(missing_ok=True)
    snapshot_path(db).unlink(missing_ok=True)
    heartbeat_path(db).unlink(missing_ok=True)
    new.replace(db)


def _self() -> str:
    """How the user invoked this command (``.venv/bin/hivestream`` after ``make demo``)."""
    argv0 = Path(sys.argv[0])
    if argv0.name == "hivestream" and argv0.exists():
        rel = os.path.relpath(argv0)
        return rel if not rel.startswith("..") else str(argv0)
    return "hivestream"


WindowOpt = Annotated[int | None, typer.Option("--window-ms", help="dedup window W in ms; 0 = unbounded (default 600000)")]
KeyOpt = Annotated[KeyStrategy | None, typer.Option("--key-strategy", help="body (default) or body+event")]
BatchOpt = Annotated[int | None, typer.Option("--batch-size", help="captures per DuckDB transaction (default 50,000, or HIVESTREAM_BATCH_SIZE)")]


@app.command()
def run(
    files: Annotated[list[Path], typer.Argument(help="session files, hook-event JSONL, directories of them, or a serve log directory")],
    db: Annotated[Path, typer.Option("--db", help="DuckDB file to write")] = Path("hivestream.duckdb"),
    gateway: Annotated[bool, typer.Option("--gateway/--no-gateway", help="also emit the OpenClaw gateway's double capture")] = False,
    window_ms: WindowOpt = None,
    key_strategy: KeyOpt = None,
    batch_size: BatchOpt = None,
    jobs: Annotated[int | None, typer.Option("--jobs", min=0, help="import processes beside the dedup and DuckDB writer (same tables); "
                                             "0: import in this process; default: one per core for inputs of 4 MiB or more")] = None,
) -> None:
    """Import session files (or a `serve` log: the same tables as serve's file), dedup and project them into DuckDB (no broker)."""
    from hivestream.embedded.frames import run_files
    from projections.frames.sink import MetaMismatch
    from streams.ingest.hook_log import is_log_dir

    paths = _expand(files)
    settings = _settings(window_ms, key_strategy, batch_size)
    logs = [p for p in paths if is_log_dir(p)]
    if jobs is None:
        jobs = 0 if logs else auto_jobs(paths)
    kb_report = None
    tune_gc()  # streams.gc_tuning: the runner's dedup state is most of what a full collection walks
    try:
        with err.status("running…") as status:
            if logs:  # a serve log: frames and KnowHub, as serve writes them (the import runs in this process)
                from hivestream.embedded.log_run import run_inputs

                report, kb_report = run_inputs(paths, db, settings=settings, gateway=gateway, on_file=lambda p: status.update(f"done {p.name}"),
                                               on_skip=lambda line: err.print(f"[yellow]note:[/] {line}"))
            else:
                report = run_files(paths, db, settings=settings, gateway=gateway, jobs=jobs,
                                   on_file=lambda p: status.update(f"done {p.name}"))
    except ValueError as e:
        err.print(f"[red]error:[/] {e}")
        raise typer.Exit(2) from e
    except MetaMismatch as e:
        err.print(f"[red]error:[/] {e}")
        raise typer.Exit(2) from e
    except duckdb.IOException as e:
        err.print(f"[red]error:[/] cannot open {db}: {e}")
        raise typer.Exit(2) from e
    print_report(report)
    if kb_report is not None:
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(kb_report.events.items())) or "none"
        out.print(f"[bold]KnowHub[/] (from the serve logs): {kinds}")


@app.command()
def demo(
    db: Annotated[Path, typer.Option("--db", help="DuckDB file to write (replaced when an earlier demo wrote it; any other file is refused)")]
    = demo_file.DEFAULT_DEMO_DB,
) -> None:
    """Run the sample sessions shipped in the package, with the gateway double capture on."""
    from hivestream.embedded.frames import run_files

    why = demo_file.refusal(db)
    if why is not None:
        err.print(f"[red]error:[/] {escape(why)}", soft_wrap=True)
        raise typer.Exit(2)
    for old in (db, db.with_name(db.name + ".wal")):
        old.unlink(missing_ok=True)
    samples = sorted(SAMPLES.glob("*.jsonl"))
    out.print(f"[bold]hivestream demo[/]: {len(samples)} sample files written for this project: "
              + ", ".join(p.name for p in samples))
    report = run_files(samples, db, gateway=True)
    demo_file.mark(db)
    print_report(report)
    from hivestream.embedded.experiences import run_kb_files
    from hivestream.report import write_report_files

    kb = run_kb_files([SAMPLES / "demo-memory-tools.jsonl"], db)  # the KnowHub calls among the tool calls, same file
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(kb.events.items()))
    out.print(f"[bold]KnowHub[/] (the sample's kb calls, same file): {kinds}")
    page = write_report_files(db, None, None, db.with_name(db.stem + "-report.html"))
    out.print(f"[bold]report[/]: {page.resolve()}  (one HTML file, opens offline)")


@app.command()
def report(
    db: Annotated[Path, typer.Option("--db", help="frames projection (embedded file, Kafka-path file or its snapshot)")] = Path("hivestream.duckdb"),
    kb_db: Annotated[Path | None, typer.Option("--kb-db", help="KnowHub projection (default: the --db file)")] = None,
    stubs_db: Annotated[Path | None, typer.Option("--stubs-db", help="memory-stub projection (default: the --db file)")] = None,
    out_path: Annotated[Path, typer.Option("--out", help="HTML file to write")] = Path("report.html"),
) -> None:
    """Write one self-contained HTML report (charts, opens offline) of the projection files."""
    from hivestream.report import write_report_files
    from hivestream.serve.read_client import ServedQueryFailed, ServeUnreachable, served_report

    notes: list[str] = []
    if kb_db in (None, db) and stubs_db in (None, db):  # one file: the serve holding it renders it, when one does
        try:
            got = served_report(db)
        except ServeUnreachable as e:
            notes.append(f"{e}; read from the file or its snapshot instead")
            got = None
        except ServedQueryFailed as e:
            err.print(f"[red]error:[/] {db}: {escape(str(e))}", soft_wrap=True)
            raise typer.Exit(2) from e
        if got is not None:
            tmp = out_path.with_name(out_path.name + ".tmp")
            try:
                tmp.write_bytes(got.body)
                tmp.replace(out_path)
            except OSError as e:  # no such directory, --out a directory, no permission: one line
                with contextlib.suppress(OSError):
                    tmp.unlink(missing_ok=True)
                err.print(f"[red]error:[/] cannot write {escape(str(out_path))}: {escape(e.strerror or type(e).__name__)}", soft_wrap=True)
                raise typer.Exit(2) from e
            err.print(got.freshness, soft_wrap=True, highlight=False)
            out.print(f"report written: {out_path.resolve()}")
            return
    try:
        page = write_report_files(db, kb_db, stubs_db, out_path, notes)
    except FileNotFoundError as e:
        err.print(f"[red]error:[/] {e}")
        raise typer.Exit(2) from e
    except OSError as e:  # --out a directory, a file without permission: one line
        err.print(f"[red]error:[/] {escape(str(e))}", soft_wrap=True)
        raise typer.Exit(2) from e
    for n in notes:
        err.print(n, soft_wrap=True, highlight=False)
    out.print(f"report written: {page.resolve()}")


@app.command()
def query(
    name: Annotated[str | None, typer.Argument(help="query name; omit with --list")] = None,
    db: Annotated[Path, typer.Option("--db", help="DuckDB file to read")] = Path("hivestream.duckdb"),
    fmt: Annotated[OutputFormat, typer.Option("--format", help="table, json or csv")] = OutputFormat.TABLE,
    list_: Annotated[bool, typer.Option("--list", help="list the named queries")] = False,
) -> None:
    """Run a named analytics query on a projection file (while `hivestream serve` holds it, serve answers)."""
    if list_ or name is None:
        out.print(table("named queries", ["name", "answers"], [(q.name, q.description) for q in ALL_QUERIES.values()]))
        return
    if name not in ALL_QUERIES:
        err.print(f"[red]error:[/] unknown query {name!r}; known: {', '.join(sorted(ALL_QUERIES))}")
        raise typer.Exit(2)
    from hivestream.serve.read_client import ServedQueryFailed, read_named
    from projections.duck_file import first_line

    try:
        cols, rows, freshness = read_named(db, "frames", ALL_QUERIES, name)
    except FileNotFoundError as e:
        err.print(f"[red]error:[/] {escape(str(e))}", soft_wrap=True)
        raise typer.Exit(2) from e
    except (duckdb.Error, ServedQueryFailed) as e:
        why = str(e) if isinstance(e, ServedQueryFailed) else f"{type(e).__name__}: {first_line(e)}"
        if name in MEMORY_QUERIES and "memory_tool_calls" in why:
            err.print(f"[red]error:[/] {db} has no memory_tool_calls table: the embedded runner (`hivestream run`) writes it, "
                      "the Kafka projector does not yet")
        else:
            err.print(f"[red]error:[/] {db} is not a hivestream projection ({escape(why)})", soft_wrap=True)
        raise typer.Exit(2) from e
    err.print(freshness, soft_wrap=True, highlight=False)
    if fmt is OutputFormat.JSON:
        json.dump([dict(zip(cols, r, strict=True)) for r in rows], sys.stdout, default=str, indent=1)
        sys.stdout.write("\n")
    elif fmt is OutputFormat.CSV:
        import csv

        w = csv.writer(sys.stdout)
        w.writerow(cols)
        w.writerows(rows)
    else:
        out.print(table(f"{name}: {ALL_QUERIES[name].description}", cols, rows))


def main() -> None:
    """Console-script entry point: user errors become one clear line and exit code 2."""
    try:
        app()
    except ValidationError as e:
        first = e.errors()[0]
        name = ".".join(map(str, first["loc"]))
        shown = "" if not name or any(w in name.lower() for w in ("password", "secret", "token")) else f" (input {first.get('input')!r})"
        err.print(f"[red]error:[/] invalid setting{' ' + name if name else 's'}: {escape(first['msg'])}{escape(shown)}", soft_wrap=True)
        sys.exit(2)
    except duckdb.Error as e:  # one line: DuckDB's out-of-memory message goes on with a list of suggestions
        err.print(f"[red]error:[/] DuckDB: {escape((str(e).splitlines() or [type(e).__name__])[0])}", soft_wrap=True, highlight=False)
        sys.exit(2)
    except Exception as e:
        from streams.kafka.errors import KafkaSetupError, explain

        if isinstance(e, KafkaSetupError) or type(e).__module__.split(".")[0] in ("kafka", "aiokafka"):
            err.print(f"[red]error:[/] {escape(explain(e))}", soft_wrap=True, highlight=False)
            sys.exit(2)
        if isinstance(e, OSError):  # a file the command reads or writes (a full disk, a directory in the way): one line
            err.print(f"[red]error:[/] {escape(str(e))}", soft_wrap=True, highlight=False)
            sys.exit(2)
        raise


# --- the Kafka path -----------------------------------------------------------------------
@app.command()
def produce(
    files: Annotated[list[Path], typer.Argument(help="session files, directories or hook-event JSONL, or a serve log directory")],
    gateway: Annotated[bool, typer.Option("--gateway/--no-gateway", help="also emit the OpenClaw gateway's double capture")] = False,
    bootstrap: BootstrapOpt = None,
    kafka_config: KafkaConfigOpt = None,
    namespace: NamespaceOpt = None,
    partitions: PartitionsOpt = None,
    replication_factor: ReplicationOpt = None,
    jobs: Annotated[int | None, typer.Option("--jobs", min=0, help="import processes beside the sender (same records, same order); "
                                             "0: import in this process; default: one per core for inputs of 4 MiB or more")] = None,
    delivery_timeout: Annotated[str | None, typer.Option(
        "--delivery-timeout", help="seconds to wait, after the last send, for the cluster to acknowledge every record "
                                   "(Kafka's delivery.timeout.ms; default 120); then exit 2, keeping what was acknowledged")] = None,
) -> None:
    """Import files onto the hook-events topic (idempotent producer, batching, progress in events/s)."""
    import time as _time

    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from streams.experiences.settings import KbSettings
    from streams.ingest.hook_log import is_log_dir
    from streams.kafka.topics import Topics
    from streams.model.clock import wall_clock_ms
    from streams.produce.producer import checked_delivery_timeout, parse_seconds, produce_files

    try:  # read here, not by typer: a value that is not a number is one line too, not a usage box
        delivery_timeout_s = None if delivery_timeout is None else checked_delivery_timeout(parse_seconds(delivery_timeout))
    except ValueError as e:
        err.print(f"[red]error:[/] {escape(str(e))}", soft_wrap=True, highlight=False)
        raise typer.Exit(2) from None
    paths = _expand(files)  # a bad input path is reported before any broker is asked
    quiet_client_logs()
    s = kafka_settings(namespace, partitions, replication_factor=replication_factor)
    conn = kafka_connection(bootstrap, kafka_config)
    t = Topics(s.topic_namespace)
    create_topics(conn, s, t.specs(s.partitions))
    logs = [p for p in paths if is_log_dir(p)]
    if logs and len(logs) != len(paths):
        err.print("[red]error:[/] produce a serve log on its own (not mixed with files)")
        raise typer.Exit(2)
    if logs:
        _produce_logs(logs, conn, t, delivery_timeout_s, s)
        return
    if jobs is None:
        jobs = auto_jobs(paths)
    tune_gc()
    t0 = _time.monotonic()
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=err, transient=True) as prog:
        task = prog.add_task("producing", total=None)

        def tick(n: int) -> None:
            rate = n / max(1e-6, _time.monotonic() - t0)
            prog.update(task, description=f"produced {n} events ({rate:,.0f} events/s)")

        rep = produce_files(paths, conn, t, gateway=gateway, now_ms=wall_clock_ms, on_event=tick,
                            privacy_mode=KbSettings().privacy_mode, jobs=jobs, delivery_timeout_s=delivery_timeout_s)
    dt = _time.monotonic() - t0
    dl = ", ".join(f"{k} {v}" for k, v in rep.dead_letters.most_common()) or "none"
    out.print(f"produced {rep.events} events from {len(paths)} files to {t.hook_events} in {dt:.1f} s "
              f"({rep.events / max(dt, 1e-6):,.0f} events/s); dead-lettered at import: {dl}")


def _produce_logs(logs: list[Path], conn: KafkaConnection, t: object, delivery_timeout_s: float | None, s: Settings) -> None:
    """``produce LOGDIR``: each serve log record for record onto the topics (:mod:`hivestream.serve.handoff`)."""
    import time as _time

    from hivestream.serve.handoff import produce_log
    from streams.kafka.topics import Topics

    assert isinstance(t, Topics)

    def stub_partitions() -> int:  # a log holding stub events: onto the stub topics, as `stubs produce` puts them
        create_topics(conn, s, t.stub_specs(s.partitions))
        return input_partitions(conn, t.stub_events, s.partitions)

    for d in logs:
        t0 = _time.monotonic()
        try:
            rep = produce_log(d, conn, t, delivery_timeout_s=delivery_timeout_s, stub_partitions=stub_partitions)
        except ValueError as e:
            err.print(f"[red]error:[/] {e}")
            raise typer.Exit(2) from e
        for note in rep.skipped_notes:
            err.print(f"[yellow]note:[/] {note}")
        dt = _time.monotonic() - t0
        stubs = f", {rep.sent['stub-events']} to {t.stub_events}" if rep.sent["stub-events"] else ""
        out.print(f"produced the serve log {d} (offsets {rep.first}..{rep.last}): {rep.sent['hook-events']} records to {t.hook_events}, "
                  f"{rep.sent['dead-letter']} to {t.dead_letter}{stubs} in {dt:.1f} s (same keys, values and event ids as ingest)")


def _expand(files: list[Path]) -> list[Path]:
    """Files as given; a serve log directory as it is; other directories expand to their ``*.jsonl`` files
    (:func:`hivestream.cli.inputs.expand_jsonl`; the other files are named on stderr; exit 2 when a directory holds none)."""
    from hivestream.cli.inputs import expand_jsonl, missing
    from streams.ingest.hook_log import is_log_dir

    if (problem := missing(files)) is not None:
        err.print(f"[red]error:[/] {escape(problem)}", soft_wrap=True, highlight=False)
        raise typer.Exit(2)
    paths: list[Path] = []
    for f in files:
        if is_log_dir(f):
            paths.append(f)
            continue
        found, skipped = expand_jsonl([f])
        if skipped:
            names = ", ".join(str(p) for p in skipped[:5]) + (f" and {len(skipped) - 5} more" if len(skipped) > 5 else "")
            err.print(f"[yellow]note:[/] skipped {len(skipped)} files in {f} that are not .jsonl: {names}")
        if not found:
            err.print(f"[red]error:[/] no .jsonl files in {f}")
            raise typer.Exit(2)
        paths.extend(found)
    return paths


@app.command()
def worker(
    bootstrap: BootstrapOpt = None,
    kafka_config: KafkaConfigOpt = None,
    namespace: NamespaceOpt = None,
    partitions: PartitionsOpt = None,
    replication_factor: ReplicationOpt = None,
    store: Annotated[str, typer.Option("--store", help="faust table store: rocksdb:// or memory://")] = "rocksdb://",
    data_dir: Annotated[Path, typer.Option("--data-dir", help="base of the workers' rocksdb state (one slot per running worker)")] = Path(".hivestream-worker"),
    frames_version: Annotated[str, typer.Option("--frames-version", help="write a versioned frames topic (see reprocess)")] = "",
    window_ms: WindowOpt = None,
    key_strategy: KeyOpt = None,
    loglevel: Annotated[str, typer.Option("--loglevel")] = "warning",
) -> None:
    """Run a faust worker: validate hook events, dedup into frames (hook-events is keyed by key group).

    An existing hook-events keeps its partition count (the worker follows it); the worker refuses to
    start when its state (the changelog topics) was built for another count.
    """
    from streams.kafka.topics import Topics
    from streams.workers.frames import create_app, run_worker

    s = kafka_settings(namespace, partitions, window_ms=window_ms, key_strategy=key_strategy, replication_factor=replication_factor)
    conn = kafka_connection(bootstrap, kafka_config)
    source = Topics(s.topic_namespace).hook_events
    n = input_partitions(conn, source, s.partitions)
    h = create_app(s, connection=conn, store=store, partitions=n, frames_version=frames_version, data_dir=str(data_dir))
    refuse_state_mismatch(conn, source, n, h.copartitioned())
    create_topics(conn, s, h.topic_specs(), wait_s=SERVICE_TOPIC_WAIT_S)
    refuse_unusable_outputs(conn, h.output_specs(), WORKER_BATCH_BYTES)
    run_worker(h, loglevel=loglevel)


@app.command()
def reprocess(
    version: Annotated[str, typer.Option("--version", help="name of the new frames topic version, e.g. v2")],
    bootstrap: BootstrapOpt = None,
    kafka_config: KafkaConfigOpt = None,
    namespace: NamespaceOpt = None,
    partitions: PartitionsOpt = None,
    replication_factor: ReplicationOpt = None,
    store: Annotated[str, typer.Option("--store")] = "rocksdb://",
    data_dir: Annotated[Path, typer.Option("--data-dir")] = Path(".hivestream-worker"),
    window_ms: WindowOpt = None,
    key_strategy: KeyOpt = None,
    loglevel: Annotated[str, typer.Option("--loglevel")] = "warning",
) -> None:
    """Re-run dedup from hook-events offset 0 with another key strategy or window into <ns>.frames.<version>.

    It is a worker with its own consumer group and table; project its topic into another file
    with `hivestream project --frames-version VERSION --db other.duckdb` and compare.
    """
    worker(bootstrap, kafka_config, namespace, partitions, replication_factor, store, data_dir, version, window_ms, key_strategy, loglevel)


def _projector(s: Settings, conn: KafkaConnection, db: Path, frames_version: str, snapshot_every_s: float,
               from_time_ms: int | None = None) -> tuple[object, object]:
    from projections.frames.projector import Projector
    from projections.frames.sink import DuckSink
    from streams.kafka.topics import Topics

    t = Topics(s.topic_namespace, frames_version)
    create_topics(conn, s, t.specs(s.partitions), wait_s=SERVICE_TOPIC_WAIT_S)
    sink = DuckSink(db)
    return sink, Projector(sink, conn, t.frames, t.dead_letter, batch_max=s.batch_size,
                           snapshot_every_s=snapshot_every_s, from_time_ms=from_time_ms,
                           memory_calls_topic=None if frames_version else t.memory_calls)


@app.command()
def project(
    db: Annotated[Path, typer.Option("--db", help="DuckDB file to write")] = Path("hivestream.duckdb"),
    bootstrap: BootstrapOpt = None,
    kafka_config: KafkaConfigOpt = None,
    namespace: NamespaceOpt = None,
    partitions: PartitionsOpt = None,
    replication_factor: ReplicationOpt = None,
    frames_version: Annotated[str, typer.Option("--frames-version")] = "",
    idle_exit_s: Annotated[float | None, typer.Option("--idle-exit", help="stop after this many seconds without records")] = None,
    snapshot_every_s: Annotated[float, typer.Option("--snapshot-every", help="seconds between published snapshots")] = 2.0,
) -> None:
    """Project the frames and dead-letter topics into DuckDB (one transaction per batch with the offsets)."""
    from projections.frames.projector import Projector
    from projections.frames.sink import DuckSink

    s = kafka_settings(namespace, partitions, replication_factor=replication_factor)
    sink, proj = _projector(s, kafka_connection(bootstrap, kafka_config), db, frames_version, snapshot_every_s)
    assert isinstance(sink, DuckSink) and isinstance(proj, Projector)
    should_stop = stop_on_signals()
    tune_gc()
    try:
        rep = proj.run(idle_exit_s=idle_exit_s, should_stop=should_stop)
    finally:
        proj.close()
        sink.close()
    out.print(f"projected {rep.records} records in {rep.batches} batches: {rep.frames_created} frames, "
              f"{rep.duplicates} duplicates, {rep.skipped} events that are not turns, {rep.dead_letters} dead letters into {db}")


@app.command()
def replay(
    db: Annotated[Path, typer.Option("--db", help="the new DuckDB file (built aside, then swapped in atomically)")],
    bootstrap: BootstrapOpt = None,
    kafka_config: KafkaConfigOpt = None,
    namespace: NamespaceOpt = None,
    partitions: PartitionsOpt = None,
    replication_factor: ReplicationOpt = None,
    frames_version: Annotated[str, typer.Option("--frames-version")] = "",
    from_time: Annotated[str | None, typer.Option("--from-time", help="start at this time (ISO-8601 or epoch) instead of offset 0")] = None,
) -> None:
    """Rebuild the projection from offset 0 (or from a time) into a new file, then swap it in atomically."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from projections.frames.projector import Projector, ProjectorReport
    from projections.frames.sink import DuckSink

    s = kafka_settings(namespace, partitions, replication_factor=replication_factor)
    conn = kafka_connection(bootstrap, kafka_config)
    ensure_not_held(db)
    tmp = db.with_name(db.name + ".replay-tmp")
    tmp.unlink(missing_ok=True)
    Path(f"{tmp}.wal").unlink(missing_ok=True)
    from_ms = None
    if from_time is not None:
        from streams.model.deadletter import RejectedInput
        from streams.model.timeparse import parse_time_ms

        try:
            from_ms = parse_time_ms(from_time)
        except RejectedInput as e:
            err.print(f"[red]error:[/] --from-time: {e.detail}")
            raise typer.Exit(2) from e
    sink, proj = _projector(s, conn, tmp, frames_version, 0, from_ms)
    assert isinstance(sink, DuckSink) and isinstance(proj, Projector)
    total = proj.lag()
    with Progress(TextColumn("replaying"), BarColumn(), TextColumn("{task.completed}/{task.total} records"),
                  TimeElapsedColumn(), console=err, transient=True) as prog:
        task = prog.add_task("replay", total=total)

        def tick(_rep: ProjectorReport, lag: int) -> None:
            prog.update(task, completed=total - lag)

        try:
            rep = proj.run(until_caught_up=True, on_progress=tick)
        finally:
            proj.close()
            sink.close()
    swap_in(tmp, db)
    out.print(f"replayed {rep.records} records into {db}: {rep.frames_created} frames, {rep.duplicates} duplicates, "
              f"{rep.skipped} events that are not turns, {rep.dead_letters} dead letters")
