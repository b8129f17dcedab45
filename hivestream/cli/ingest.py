"""Typer commands of live ingestion: ``ingest``, ``hook`` and ``hooks install|uninstall``."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from hivestream.cli.kafka_opts import BootstrapOpt, KafkaConfigOpt, NamespaceOpt, PartitionsOpt, ReplicationOpt, kafka_connection, kafka_settings

hooks_app = typer.Typer(help="install or remove hivestream's hooks in Claude Code, Codex or OpenClaw", no_args_is_help=True)


def ingest(
    host: Annotated[str, typer.Option("--host", help="address to listen on (non-loopback needs tokens)")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="TCP port (0: any free port)")] = 8787,
    tokens_file: Annotated[Path | None, typer.Option("--tokens-file", envvar="HIVESTREAM_INGEST_TOKENS_FILE",
                                                     help="'GATEWAY_ID TOKEN [scopes=hooks,review]' per line (TOKEN may be sha256:HEX)")] = None,
    spool_dir: Annotated[Path | None, typer.Option("--spool-dir", envvar="HIVESTREAM_SPOOL_DIR",
                                                   help="durable spool directory, one process each (default ~/.local/state/hivestream/ingest-spool)")] = None,
    spool_max_bytes: Annotated[int, typer.Option("--spool-max-bytes", help="bound of the spool (bytes)")] = 1 << 30,
    max_body_bytes: Annotated[int, typer.Option("--max-body-bytes", help="largest request body (bytes)")] = 1 << 20,
    read_timeout_s: Annotated[float, typer.Option("--read-timeout", help="seconds allowed to receive a body")] = 10.0,
    produce_timeout_s: Annotated[float, typer.Option("--produce-timeout", help="seconds to wait for the broker before spooling")] = 5.0,
    access_log: Annotated[bool, typer.Option("--access-log", help="log one line per request")] = False,
    reuse_port: Annotated[bool, typer.Option("--reuse-port", help="SO_REUSEPORT: several ingest processes share --port (each its own --spool-dir)")] = False,
    metrics_auth: Annotated[bool, typer.Option("--metrics-auth", help="GET /metrics needs a bearer token of --tokens-file")] = False,
    db: Annotated[Path | None, typer.Option("--db", help="the projection `kb project` keeps (its snapshot answers the agent API /api/*; "
                                            "without it the agent routes are not served)")] = None,
    frames_db: Annotated[Path | None, typer.Option("--frames-db", help="the frames projection `project` keeps, for /api/memory/search "
                                                   "(default: --db)")] = None,
    max_staleness_s: Annotated[float, typer.Option("--max-staleness", help="oldest snapshot the agent API answers from (seconds; "
                                                   "older: 503 stale)")] = 60.0,
    stubs_live: Annotated[bool, typer.Option("--stubs-live/--no-stubs-live", help="match prompts against the memory stubs of "
                                             "<ns>.stub-events and answer the archives they need (docs/stubs-live.md)")] = True,
    stub_budget_s: Annotated[float, typer.Option("--stub-budget", help="seconds a prompt waits for its stub context")] = 1.5,
    stub_threshold: Annotated[float | None, typer.Option("--stub-threshold", help="minimum similarity, -1..1 (default 0.65; "
                                                         "as the stub worker's --threshold)")] = None,
    stub_top_n: Annotated[int | None, typer.Option("--stub-top-n", help="at most N archives per prompt (default 3)")] = None,
    stub_tokens: Annotated[int | None, typer.Option("--stub-tokens", help="at most this many archive tokens per prompt (default 4000)")] = None,
    bootstrap: BootstrapOpt = None,
    kafka_config: KafkaConfigOpt = None,
    namespace: NamespaceOpt = None,
    partitions: PartitionsOpt = None,
    replication_factor: ReplicationOpt = None,
) -> None:
    """HTTP server for live hook events: POST /v1/hooks/{runtime}, GET /healthz, GET /metrics; with --db the agent API /api/*.

    A Kafka setting that cannot work (an unreadable properties file, an unknown mechanism) stops it
    at start; a broker it cannot reach or authenticate to does not: it serves, spools and logs the
    cause once, and forwards the spool when the broker takes it.
    """
    import logging

    from hivestream.cli import numbers
    from hivestream.ingest.server import ConfigError, IngestConfig, run

    try:
        numbers.port(port)
        numbers.body_limit("--max-body-bytes", max_body_bytes)
        numbers.bound_for_bodies("--spool-max-bytes", spool_max_bytes, max_body_bytes)
        numbers.seconds("--read-timeout", read_timeout_s, zero=False)
        numbers.seconds("--produce-timeout", produce_timeout_s, zero=False)
        numbers.seconds("--max-staleness", max_staleness_s, zero=False)
        numbers.seconds("--stub-budget", stub_budget_s, zero=False)
    except numbers.BadOption as e:
        print(f"error: {e}", file=sys.stderr)
        raise typer.Exit(2) from None
    from hivestream.ingest.spool import default_spool_dir
    from streams.experiences.settings import ExperienceSettings
    from streams.ingest.auth import TokenTable, load_tokens
    from streams.kafka.errors import KafkaSetupError, scrub_logging

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    scrub_logging()
    for noisy in ("kafka", "aiokafka"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    logging.getLogger("aiokafka.client").setLevel(logging.CRITICAL)  # "Unable connect to ...": the sink logs the cause once instead
    s = kafka_settings(namespace, partitions, replication_factor=replication_factor)
    try:
        conn = kafka_connection(bootstrap, kafka_config, check=False)
    except KafkaSetupError as e:
        print(f"error: {e}", file=sys.stderr)
        raise typer.Exit(2) from e
    entries = []
    if tokens_file is not None:
        try:
            entries = load_tokens(tokens_file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            print(f"error: {tokens_file}: {e}", file=sys.stderr)
            raise typer.Exit(2) from e

    cfg = IngestConfig(host=host, port=port, tokens=TokenTable(entries), connection=conn, namespace=s.topic_namespace,
                       partitions=s.partitions, replication_factor=s.replication_factor, min_insync_replicas=s.min_insync_replicas,
                       spool_dir=spool_dir or default_spool_dir(), spool_max_bytes=spool_max_bytes, max_body_bytes=max_body_bytes,
                       read_timeout_s=read_timeout_s, produce_timeout_s=produce_timeout_s, privacy_mode=ExperienceSettings().privacy_mode,
                       access_log=access_log, reuse_port=reuse_port, metrics_auth=metrics_auth)

    def ready(p: int) -> None:
        print(f"hivestream ingest: listening on http://{host}:{p}", file=sys.stderr, flush=True)

    mount = None
    if db is not None:
        from hivestream.api.mounts import for_ingest

        mount = for_ingest(ExperienceSettings(), db, frames_db, max_staleness_s)
    door = None
    if stubs_live:
        from pydantic import ValidationError

        from hivestream.cli.stubs_kafka import policy_of
        from hivestream.services.stub_follow import kafka_stub_door
        from streams.kafka.topics import Topics

        try:
            policy = policy_of(stub_threshold, stub_top_n, stub_tokens)
        except ValidationError as e:
            why = "; ".join(f"{'.'.join(map(str, x['loc']))}: {x['msg']}" for x in e.errors())
            print(f"error: --stub-threshold/--stub-top-n/--stub-tokens: {why}", file=sys.stderr)
            raise typer.Exit(2) from None
        try:
            door, note = kafka_stub_door(conn, Topics(s.topic_namespace).stub_events, stub_budget_s, policy)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            raise typer.Exit(2) from None
        print(f"hivestream ingest: {note}", file=sys.stderr, flush=True)
    try:
        if door is not None:
            door.follower.start()
        run(cfg, ready, mount, door)
    except (ConfigError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        raise typer.Exit(2) from e
    finally:
        if door is not None:
            door.close()


def hook(
    args: Annotated[list[str] | None, typer.Argument(help="RUNTIME [PAYLOAD] or flush; options --url, --spool-dir, --timeout, --flush-max, --chain")] = None,
) -> None:
    """Command hook: post stdin's (or the last argument's) payload to ingest; spool it on failure. Always exits 0."""
    from hivestream.hooks.command import main as hook_main

    raise typer.Exit(hook_main(list(args or [])))


@hooks_app.command("install")
def install(
    runtime: Annotated[str, typer.Argument(help="claude-code, codex or openclaw")],
    url: Annotated[str, typer.Option("--url", envvar="HIVESTREAM_INGEST_URL", help="the ingest server")] = "http://127.0.0.1:8787",
    scope: Annotated[str, typer.Option("--scope", help="user (~/.claude, ~/.codex, ~/.openclaw) or project (./.claude, ./.codex)")] = "user",
    command: Annotated[bool, typer.Option("--command", help="Claude Code: command hooks ('hivestream hook claude-code', async) instead of http")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="print the change, write nothing")] = False,
    knowhub: Annotated[bool, typer.Option("--knowhub", help="also install KnowHub for agents pointing at --url: claude-code, codex: the MCP "
                                                            "server (URL/mcp), a SessionStart reminder and the skill guide; openclaw: the plugin")] = False,
) -> None:
    """Write the runtime's hook configuration (merged, backed up, idempotent)."""
    from hivestream.hooks.install import apply

    if knowhub and _knowhub_refused(runtime, scope):
        raise typer.Exit(2)
    code = apply(runtime, install=True, url=url, scope=scope, command=command, dry_run=dry_run, home=_home())
    raise typer.Exit(_knowhub(knowhub, code, runtime, install=True, url=url, scope=scope, dry_run=dry_run))


@hooks_app.command("uninstall")
def uninstall(
    runtime: Annotated[str, typer.Argument(help="claude-code, codex or openclaw")],
    scope: Annotated[str, typer.Option("--scope", help="user or project")] = "user",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="print the change, write nothing")] = False,
    knowhub: Annotated[bool, typer.Option("--knowhub", help="also remove what --knowhub installed")] = False,
) -> None:
    """Remove hivestream's hooks, leaving the user's own hooks as they were."""
    from hivestream.hooks.install import apply

    if knowhub and _knowhub_refused(runtime, scope):
        raise typer.Exit(2)
    code = apply(runtime, install=False, url="", scope=scope, command=False, dry_run=dry_run, home=_home())
    raise typer.Exit(_knowhub(knowhub, code, runtime, install=False, url="", scope=scope, dry_run=dry_run))


def _knowhub_refused(runtime: str, scope: str) -> bool:
    """True (after one error line) when ``--knowhub`` cannot apply: an unknown runtime, or OpenClaw's project scope."""
    if runtime not in ("claude-code", "codex", "openclaw"):
        print(f"error: --knowhub is for claude-code, codex or openclaw, not {runtime!r}", file=sys.stderr)
    elif runtime == "openclaw" and scope != "user":
        print("error: --knowhub installs the OpenClaw plugin for the user scope only (OpenClaw's global plugin root)", file=sys.stderr)
    else:
        return False
    return True


def _knowhub(knowhub: bool, code: int, runtime: str, *, install: bool, url: str, scope: str, dry_run: bool) -> int:
    """The exit code after ``--knowhub``'s part (the OpenClaw plugin; for Claude Code and Codex the MCP
    server, the reminder and the skill guide), run when the hooks' part succeeded."""
    if not knowhub or code != 0:
        return code
    if runtime == "openclaw":
        from hivestream.hooks.openclaw_plugin import apply_plugin

        return apply_plugin(install=install, url=url, scope=scope, dry_run=dry_run, home=_home())
    from hivestream.hooks.knowhub_install import apply_knowhub

    return apply_knowhub(runtime, install=install, url=url, scope=scope, dry_run=dry_run, home=_home())


def _home() -> Path:
    return Path(os.environ.get("HOME") or Path.home())


def register(app: typer.Typer) -> None:
    """Add ``ingest``, ``hook`` and ``hooks`` to the main app."""
    app.command("ingest")(ingest)
    app.command("hook", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(hook)
    app.add_typer(hooks_app, name="hooks", help="install/uninstall hooks: claude-code, codex, openclaw")
