"""The ``hivestream`` command line (typer)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import duckdb
import typer
from rich.console import Console
from rich.table import Table

from hivestream.runner import RunReport, run_files
from projections.queries import QUERIES, run_query
from projections.sink import MetaMismatch
from streams.body_hash import KeyStrategy
from streams.settings import Settings

app = typer.Typer(help="hivestream: dedup AI-agent memory captures into DuckDB projections.", no_args_is_help=True)
out = Console(width=max(100, Console().width))
err = Console(stderr=True)

SAMPLES = Path(__file__).parent / "samples"


def _settings(window_ms: int | None, key_strategy: KeyStrategy | None, batch_size: int | None) -> Settings:
    overrides: dict[str, object] = {}
    if window_ms is not None:
        overrides["window_ms"] = window_ms
    if key_strategy is not None:
        overrides["key_strategy"] = key_strategy
    if batch_size is not None:
        overrides["batch_size"] = batch_size
    return Settings(**overrides)  # type: ignore[arg-type]


def _table(title: str, cols: list[str], rows: list[tuple[object, ...]]) -> Table:
    t = Table(title=title, title_justify="left")
    for c in cols:
        t.add_column(c)
    for r in rows:
        t.add_row(*("" if v is None else str(v) for v in r))
    return t


def print_report(report: RunReport) -> None:
    """Print a run's summary: what came in, frames out, duplicates per source pair, dead letters."""
    fmts: dict[str, int] = {}
    for f in report.inputs.values():
        fmts[f] = fmts.get(f, 0) + 1
    out.print(f"[bold]inputs[/]: {len(report.inputs)} files ({', '.join(f'{n} {k}' for k, n in sorted(fmts.items()))}), "
              f"{report.records} input records with events, {report.skipped} events already applied")
    out.print(f"[bold]hook events[/]: {report.events} ({report.captures} captures with turn text, {report.not_captures} tool/lifecycle events)")
    out.print(f"[bold]frames out[/]: {report.frames_created}; [bold]duplicates collapsed[/]: {report.duplicates}"
              + (f"; {report.repeated} captures were already applied (same event ids)" if report.repeated else ""))
    dl = sum(report.dead_letters.values())
    detail = ", ".join(f"{k} {v}" for k, v in report.dead_letters.most_common())
    out.print(f"[bold]dead-lettered[/]: {dl}" + (f" ({detail})" if detail else ""))
    con = duckdb.connect(report.db, read_only=True)
    try:
        cols, rows = run_query(con, "dedup-summary")
        out.print(_table("duplicates collapsed per source pair (whole file)", cols, rows))
    finally:
        con.close()
    out.print(f"[bold]DuckDB file[/]: {Path(report.db).resolve()}  (try: hivestream query top-frames --db {report.db})")


WindowOpt = Annotated[int | None, typer.Option("--window-ms", help="dedup window W in ms; 0 = unbounded (default 600000)")]
KeyOpt = Annotated[KeyStrategy | None, typer.Option("--key-strategy", help="body (default) or body+event")]
BatchOpt = Annotated[int | None, typer.Option("--batch-size", help="captures per DuckDB transaction")]


@app.command()
def run(
    files: Annotated[list[Path], typer.Argument(help="session files or hook-event JSONL", exists=True, dir_okay=True)],
    db: Annotated[Path, typer.Option("--db", help="DuckDB file to write")] = Path("hivestream.duckdb"),
    gateway: Annotated[bool, typer.Option("--gateway/--no-gateway", help="also emit the OpenClaw gateway's double capture")] = False,
    window_ms: WindowOpt = None,
    key_strategy: KeyOpt = None,
    batch_size: BatchOpt = None,
) -> None:
    """Import session files, dedup and project them into DuckDB, in one process (no broker)."""
    paths: list[Path] = []
    for f in files:
        paths.extend(sorted(p for p in f.rglob("*.jsonl")) if f.is_dir() else [f])
    settings = _settings(window_ms, key_strategy, batch_size)
    try:
        with err.status("running…") as status:
            report = run_files(paths, db, settings=settings, gateway=gateway,
                               on_file=lambda p: status.update(f"done {p.name}"))
    except MetaMismatch as e:
        err.print(f"[red]error:[/] {e}")
        raise typer.Exit(2) from e
    except duckdb.IOException as e:
        err.print(f"[red]error:[/] cannot open {db}: {e}")
        raise typer.Exit(2) from e
    print_report(report)


@app.command()
def demo(
    db: Annotated[Path, typer.Option("--db", help="DuckDB file to write (replaced)")] = Path("hivestream-demo.duckdb"),
) -> None:
    """Run the sample sessions shipped in the package, with the gateway double capture on."""
    if db.exists():
        db.unlink()
    samples = sorted(SAMPLES.glob("*.jsonl"))
    out.print(f"[bold]hivestream demo[/]: {len(samples)} sample files written for this project: "
              + ", ".join(p.name for p in samples))
    report = run_files(samples, db, gateway=True)
    print_report(report)


@app.command()
def query(
    name: Annotated[str | None, typer.Argument(help="query name; omit with --list")] = None,
    db: Annotated[Path, typer.Option("--db", help="DuckDB file to read")] = Path("hivestream.duckdb"),
    fmt: Annotated[str, typer.Option("--format", help="table, json or csv")] = "table",
    list_: Annotated[bool, typer.Option("--list", help="list the named queries")] = False,
) -> None:
    """Run a named analytics query on a projection file."""
    if list_ or name is None:
        out.print(_table("named queries", ["name", "answers"], [(q.name, q.description) for q in QUERIES.values()]))
        return
    if name not in QUERIES:
        err.print(f"[red]error:[/] unknown query {name!r}; known: {', '.join(sorted(QUERIES))}")
        raise typer.Exit(2)
    if not db.exists():
        err.print(f"[red]error:[/] no such DuckDB file: {db}")
        raise typer.Exit(2)
    con = duckdb.connect(str(db), read_only=True)
    try:
        cols, rows = run_query(con, name)
    finally:
        con.close()
    if fmt == "json":
        json.dump([dict(zip(cols, r, strict=True)) for r in rows], sys.stdout, default=str, indent=1)
        sys.stdout.write("\n")
    elif fmt == "csv":
        import csv

        w = csv.writer(sys.stdout)
        w.writerow(cols)
        w.writerows(rows)
    else:
        out.print(_table(f"{name}: {QUERIES[name].description}", cols, rows))


def main() -> None:
    """Console-script entry point."""
    app()
