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
from hivestream.cli.kafka_path import register as register_kafka_path
from hivestream.cli.kb import kb_app
from hivestream.cli.lag import register as register_lag
from hivestream.cli.mcp import register as register_mcp
from hivestream.cli.run_opts import BatchOpt, KeyOpt, WindowOpt, dedup_settings, expand_or_exit
from hivestream.cli.serve import register as register_serve
from hivestream.cli.stubs import stubs_app
from hivestream.cli.topics import register as register_topics
from projections.frames.analytics import ANALYTICS_QUERIES, MEMORY_QUERIES
from projections.frames.queries import QUERIES
from projections.named_query import NamedQuery, run_query
from streams.gc_tuning import tune_gc
from streams.importers.ordered_pool import auto_jobs

if TYPE_CHECKING:
    from hivestream.embedded.frames import RunReport

# hivestream.embedded.frames and projections.frames.projection (pyarrow, the runner) are imported by the
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


def _self() -> str:
    """How the user invoked this command (``.venv/bin/hivestream`` after ``make demo``)."""
    argv0 = Path(sys.argv[0])
    if argv0.name == "hivestream" and argv0.exists():
        rel = os.path.relpath(argv0)
        return rel if not rel.startswith("..") else str(argv0)
    return "hivestream"


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
    from projections.frames.projection import MetaMismatch
    from streams.ingest.hook_log import is_log_dir

    paths = expand_or_exit(files, err)
    settings = dedup_settings(window_ms, key_strategy, batch_size)
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


register_kafka_path(app)  # produce, worker, reprocess, project, replay (after the file commands: --help lists them in this order)
