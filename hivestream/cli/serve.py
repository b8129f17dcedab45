"""Typer command ``hivestream serve``: live capture on one machine (:mod:`hivestream.serve`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from streams.model.body_hash import KeyStrategy

if TYPE_CHECKING:
    from hivestream.services.stub_serve import ServeStubs, StubsLive

DAY_MS = 86_400_000
MAX_STUB_BUDGET_S = 30.0
"""The longest a prompt may wait for its stub context (seconds): Claude Code's default UserPromptSubmit timeout."""


def _fail(msg: str) -> typer.Exit:
    print(f"error: {msg}", file=sys.stderr)
    return typer.Exit(2)


def _serve_stubs(live: StubsLive) -> ServeStubs:
    """Serve's live stubs, or exit 2 with one line on an unusable embedder setting."""
    from hivestream.services.stub_serve import ServeStubs

    try:
        return ServeStubs(live)
    except ValueError as e:
        raise _fail(str(e)) from None


def serve(
    db: Annotated[Path, typer.Option("--db", help="DuckDB file kept current (created when missing)")] = Path("hivestream.duckdb"),
    log_dir: Annotated[Path | None, typer.Option("--log-dir", help="the hook-event log (default: <db>.hook-events/ beside the file)")] = None,
    host: Annotated[str, typer.Option("--host", help="address to listen on (non-loopback needs tokens)")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="TCP port (0: any free port)")] = 8787,
    tokens_file: Annotated[Path | None, typer.Option("--tokens-file", envvar="HIVESTREAM_INGEST_TOKENS_FILE",
                                                     help="'GATEWAY_ID TOKEN [scopes=hooks,review]' per line (TOKEN may be sha256:HEX)")] = None,
    max_body_bytes: Annotated[int, typer.Option("--max-body-bytes", help="largest request body (bytes)")] = 1 << 20,
    read_timeout_s: Annotated[float, typer.Option("--read-timeout", help="seconds allowed to receive a body")] = 10.0,
    log_max_bytes: Annotated[int, typer.Option("--log-max-bytes", help="bound of the log (bytes; past it POSTs get 503)")] = 8 << 30,
    retain_bytes: Annotated[int | None, typer.Option("--retain-bytes", help="delete the oldest applied log segments past this size (bytes)")] = None,
    retain_days: Annotated[float | None, typer.Option("--retain-days", help="delete applied log segments last written more than this many days ago")] = None,
    snapshot_every_s: Annotated[float, typer.Option("--snapshot-every", help="least seconds between snapshots for readers not asking serve (0: none)")] = 1.0,
    report: Annotated[Path | None, typer.Option("--report", help="HTML report kept current (default: <db stem>-report.html)")] = None,
    report_every_s: Annotated[float, typer.Option("--report-every", help="least seconds between two refreshes of the report")] = 60.0,
    no_report: Annotated[bool, typer.Option("--no-report", help="do not write the report")] = False,
    window_ms: Annotated[int | None, typer.Option("--window-ms", help="dedup window W in ms; 0 = unbounded (default 600000)")] = None,
    key_strategy: Annotated[KeyStrategy | None, typer.Option("--key-strategy", help="body (default) or body+event")] = None,
    access_log: Annotated[bool, typer.Option("--access-log", help="log one line per request")] = False,
    stubs_live: Annotated[bool, typer.Option("--stubs-live/--no-stubs-live", help="match prompts against the memory stubs and answer "
                                             "the archives they need (docs/stubs-live.md)")] = True,
    stub_budget_s: Annotated[float, typer.Option("--stub-budget", help="seconds a prompt waits for its stub context")] = 1.5,
    stub_refresh_at: Annotated[str, typer.Option("--stub-refresh-at", help="the nightly stub refresh, HH:MM UTC ('off': none)")] = "03:20",
    install_service: Annotated[bool, typer.Option("--install-service", help="write a user service (systemd on Linux, launchd on macOS) "
                                                  "that runs serve with these options and restarts it; print how to enable it")] = False,
    service_platform: Annotated[str, typer.Option("--service-platform", hidden=True)] = sys.platform,
) -> None:
    """Live capture without a broker: the ingest HTTP API over a local durable log, deduplicated into --db as it arrives."""
    from hivestream.cli import numbers
    from hivestream.serve.app import default_log_dir, default_report

    try:
        numbers.port(port)
        numbers.body_limit("--max-body-bytes", max_body_bytes)
        numbers.seconds("--read-timeout", read_timeout_s, zero=False)
        numbers.bound_for_bodies("--log-max-bytes", log_max_bytes, max_body_bytes)
        if retain_bytes is not None:
            numbers.byte_count("--retain-bytes", retain_bytes, 0)
        if retain_days is not None:
            numbers.days("--retain-days", retain_days)
        numbers.seconds("--snapshot-every", snapshot_every_s, zero=True)
        numbers.seconds("--report-every", report_every_s, zero=True)
        numbers.seconds("--stub-budget", stub_budget_s, zero=False)
        if stub_budget_s > MAX_STUB_BUDGET_S:  # past it the runtime has given up on the hook: its answer would be discarded
            raise numbers.BadOption(f"--stub-budget {stub_budget_s:g}: at most {MAX_STUB_BUDGET_S:g} s (a UserPromptSubmit hook's own "
                                    "timeout; the installed hooks wait 5 s)")
    except numbers.BadOption as e:
        raise _fail(str(e)) from None
    if stub_refresh_at != "off":
        from hivestream.services.stub_nightly import parse_at

        try:
            parse_at(stub_refresh_at)
        except ValueError as e:
            raise _fail(f"--stub-refresh-at: {e} (or 'off')") from None
    from hivestream.services.stub_serve import StubsLive

    live = StubsLive(budget_s=stub_budget_s, refresh_at=None if stub_refresh_at == "off" else stub_refresh_at) if stubs_live else None

    db = db.absolute()
    log_dir = (log_dir or default_log_dir(db)).absolute()
    report_path = None if no_report else (report or default_report(db)).absolute()
    if install_service:
        _install(db, log_dir, host, port, tokens_file, max_body_bytes, read_timeout_s, log_max_bytes, retain_bytes, retain_days,
                 snapshot_every_s, report_path, report_every_s, window_ms, key_strategy, access_log, service_platform)
        return
    _serve(db, log_dir, host, port, tokens_file, max_body_bytes, read_timeout_s, log_max_bytes, retain_bytes, retain_days,
           snapshot_every_s, report_path, report_every_s, window_ms, key_strategy, access_log, live)


def _serve(db: Path, log_dir: Path, host: str, port: int, tokens_file: Path | None, max_body_bytes: int, read_timeout_s: float,
           log_max_bytes: int, retain_bytes: int | None, retain_days: float | None, snapshot_every_s: float, report_path: Path | None,
           report_every_s: float, window_ms: int | None, key_strategy: KeyStrategy | None, access_log: bool, live: StubsLive | None = None) -> None:
    import logging

    import duckdb

    from hivestream.api.mounts import for_serve
    from hivestream.ingest.server import ConfigError, IngestConfig
    from hivestream.serve.app import ServeConfig, run
    from hivestream.serve.follower import FollowerOptions
    from hivestream.serve.log_writer import LogBusy, Retention
    from hivestream.serve.publisher import PublishOptions
    from projections.duck_file import first_line, held_by_another
    from projections.frames.projection import MetaMismatch
    from streams.experiences.extract import ChatClient
    from streams.experiences.settings import ExperienceSettings
    from streams.ingest.auth import TokenTable, load_tokens
    from streams.settings import Settings

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # an embeddings endpoint's every request is no news
    entries = []
    if tokens_file is not None:
        try:
            entries = load_tokens(tokens_file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise _fail(f"{tokens_file}: {e}") from e
    overrides: dict[str, object] = {}
    if window_ms is not None:
        overrides["window_ms"] = window_ms
    if key_strategy is not None:
        overrides["key_strategy"] = key_strategy
    settings = Settings(**overrides)  # type: ignore[arg-type]
    kbs = ExperienceSettings()
    http = IngestConfig(host=host, port=port, tokens=TokenTable(entries), max_body_bytes=max_body_bytes, read_timeout_s=read_timeout_s,
                        privacy_mode=kbs.privacy_mode, access_log=access_log)
    retention = Retention(retain_bytes, None if retain_days is None else int(retain_days * 86_400_000))
    cfg = ServeConfig(http=http, db=db, log_dir=log_dir, log_max_bytes=log_max_bytes,
                      follower=FollowerOptions(retention=retention),
                      publish=PublishOptions(snapshot_every_s=snapshot_every_s, report=report_path, report_every_s=report_every_s),
                      settings=settings, kb_settings=kbs, api=for_serve(kbs, db),
                      stubs_live=None if live is None else _serve_stubs(live))
    completer = None
    if kbs.extraction_enabled:
        try:
            completer = ChatClient(kbs.extraction_base_url, kbs.extraction_model, kbs.extraction_api_key, kbs.extraction_timeout_s)
        except ValueError as e:
            raise _fail(f"extraction endpoint refused: {e}") from e

    def ready(p: int) -> None:
        me = _self()
        print(f"hivestream serve: listening on http://{host}:{p}\n"
              f"  log:    {log_dir}  (the source of truth; `{me} run {log_dir} --db OTHER.duckdb` rebuilds the file, "
              f"`{me} produce {log_dir}` moves it onto Kafka)\n"
              f"  DuckDB: {db}  (while serve runs: `{me} query totals --db {db}` asks serve)\n"
              f"  report: {report_path if report_path else '(off)'}"
              + (f"  (refreshed every {report_every_s:g} s; `{me} report --db {db}` writes one now)" if report_path else ""),
              file=sys.stderr, flush=True)

    try:
        run(cfg, ready, completer)
    except duckdb.Error as e:  # before ValueError: some of DuckDB's errors are ValueErrors too
        why = "another process holds it (a running `run`, `serve` or projector?): " if held_by_another(e) else ""
        raise _fail(f"cannot open {db}: {why}{first_line(e)}") from e
    except (ConfigError, LogBusy, MetaMismatch, ValueError, OSError) as e:
        raise _fail(str(e)) from e
    finally:
        if completer is not None:
            completer.close()


def _install(db: Path, log_dir: Path, host: str, port: int, tokens_file: Path | None, max_body_bytes: int, read_timeout_s: float,
             log_max_bytes: int, retain_bytes: int | None, retain_days: float | None, snapshot_every_s: float, report_path: Path | None,
             report_every_s: float, window_ms: int | None, key_strategy: KeyStrategy | None, access_log: bool, platform: str) -> None:
    from hivestream.hooks.install import hivestream_exe
    from hivestream.serve.service import carried_environment, install

    argv = [hivestream_exe(), "serve", "--db", str(db), "--log-dir", str(log_dir), "--host", host, "--port", str(port),
            "--max-body-bytes", str(max_body_bytes), "--read-timeout", f"{read_timeout_s:g}", "--log-max-bytes", str(log_max_bytes),
            "--snapshot-every", f"{snapshot_every_s:g}", "--report-every", f"{report_every_s:g}"]
    argv += ["--report", str(report_path)] if report_path else ["--no-report"]
    if tokens_file is not None:
        argv += ["--tokens-file", str(tokens_file.absolute())]
    if retain_bytes is not None:
        argv += ["--retain-bytes", str(retain_bytes)]
    if retain_days is not None:
        argv += ["--retain-days", f"{retain_days:g}"]
    if window_ms is not None:
        argv += ["--window-ms", str(window_ms)]
    if key_strategy is not None:
        argv += ["--key-strategy", str(key_strategy)]
    if access_log:
        argv += ["--access-log"]
    home = Path(os.environ.get("HOME") or Path.home())
    settings, secrets = carried_environment(dict(os.environ))
    try:
        done = install(platform, argv, db.parent, home, dict(os.environ), settings)
    except (ValueError, OSError) as e:
        raise _fail(str(e)) from e
    print(f"wrote {done.path}\nenable and start it (it then starts at every login and is restarted if it stops):")
    for c in done.commands:
        print(f"  {c}")
    for n in done.notes:
        print(f"  {n}")
    if settings:
        print(f"  it sets the settings of this environment: {', '.join(settings)}")
    if secrets:
        print(f"  not written into it (secrets): {', '.join(secrets)}; give them to the service yourself if it needs them "
              "(systemd: `systemctl --user edit hivestream-serve`; launchd: the plist's EnvironmentVariables)")
    print("the command hooks keep what they could not deliver while it is down and forward it once it is back.")


def _self() -> str:
    argv0 = Path(sys.argv[0])
    if argv0.name == "hivestream" and argv0.exists():
        rel = os.path.relpath(argv0)
        return rel if not rel.startswith("..") else str(argv0)
    return "hivestream"


def register(app: typer.Typer) -> None:
    """Add ``serve`` to the main app."""
    app.command("serve")(serve)
