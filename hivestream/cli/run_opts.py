"""Options and inputs shared by the file and Kafka commands of ``hivestream`` (``run``, ``produce``, ``worker``, ...)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from hivestream.cli.inputs import expand_jsonl, missing
from streams.model.body_hash import KeyStrategy
from streams.settings import Settings

WindowOpt = Annotated[int | None, typer.Option("--window-ms", help="dedup window W in ms; 0 = unbounded (default 600000)")]
KeyOpt = Annotated[KeyStrategy | None, typer.Option("--key-strategy", help="body (default) or body+event")]
BatchOpt = Annotated[int | None, typer.Option("--batch-size", help="captures per DuckDB transaction (default 50,000, or HIVESTREAM_BATCH_SIZE)")]


def dedup_settings(window_ms: int | None, key_strategy: KeyStrategy | None, batch_size: int | None) -> Settings:
    """The dedup settings of the environment with the options given on the command line (``None``: not given)."""
    overrides: dict[str, object] = {}
    if window_ms is not None:
        overrides["window_ms"] = window_ms
    if key_strategy is not None:
        overrides["key_strategy"] = key_strategy
    if batch_size is not None:
        overrides["batch_size"] = batch_size
    return Settings(**overrides)  # type: ignore[arg-type]


def expand_or_exit(files: list[Path], err: Console) -> list[Path]:
    """Files as given; a serve log directory as it is; other directories expand to their ``*.jsonl`` files
    (:func:`hivestream.cli.inputs.expand_jsonl`; the other files are named on stderr; exit 2 when a directory holds none)."""
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
