"""Kafka as users run it, on a real three-broker cluster (``deploy/kafka/cluster.sh``): every Kafka command over
SASL_SSL with SCRAM, configured by nothing but a Java-client ``client.properties`` and
``KAFKA_BOOTSTRAP_SERVERS``, equal to the embedded runners; three replicas on every topic a
namespace gets (changelogs included); one-line errors for a wrong password, a wrong CA and a
mechanism the cluster does not offer, with no secret in any output."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import httpx
import pytest
from kafka.errors import KafkaError

from bench.backlog import BacklogSpec, write_backlog
from streams.kafka.topics import Topics
from streams.model.events import HookEvent
from tests.support.ingest_harness import IngestProc, read_topic
from tests.support.kafka_cluster import LocalCluster, local_cluster
from tests.support.kafka_harness import frame_tables, group_lag, stop, unique_namespace, wait_until, worker_group
from tests.support.stub_kafka_scenario import embedded, stub_scenario, stub_tables, write_scenario

pytestmark = [pytest.mark.kafka, pytest.mark.cluster]

FAULT_TURNS = 2_000  # 8,000 backlog events per fault test (CI stays under 30 minutes)
STUB_POLICY = ["--threshold", "0.6", "--top-n", "2", "--budget", "500"]  # tests.projections.test_stub_projection.POLICY, as `embedded` uses


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with local_cluster() as c:
        yield c


def _password(c: LocalCluster) -> str:
    m = re.search(r'password="([^"]+)"', c.client_properties.read_text())
    assert m
    return m.group(1)


def _caught_up(c: LocalCluster, group: str, topics: list[str]) -> bool:
    try:
        return group_lag(c.plain, group, topics) == 0
    except KafkaError:  # the group coordinator is not ready yet
        return False


def _ingest_events(c: LocalCluster, ns: str, spool: Path, n: int) -> list[str]:
    """POST ``n`` prompts to a ``hivestream ingest`` on the cluster; the event ids it acknowledged as on the broker."""
    proc = IngestProc(c.sasl, ns, spool)  # IngestProc passes the environment on: the test sets the cluster's
    try:
        wait_until(lambda: httpx.get(proc.url + "/healthz", timeout=10).json()["broker"] == "up", 120, "ingest's producer")
        body = [{"session_id": "sasl-ingest", "hook_event_name": "UserPromptSubmit", "prompt": f"over SASL_SSL number {i}",
                 "cwd": "/w/cluster", "event_time_ms": 1_790_000_000_000 + i} for i in range(n)]
        r = httpx.post(proc.url + "/v1/hooks/claude-code", json=body, timeout=60)
        assert r.status_code == 200 and r.json()["durable"] == "broker", r.text
        return [x["event_id"] for x in r.json()["results"]]
    finally:
        proc.stop()


def test_every_kafka_command_over_sasl_ssl_equals_the_embedded_runners(cluster: LocalCluster, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    c = cluster
    for k, v in c.env().items():
        monkeypatch.setenv(k, v)
    ns = unique_namespace("sasl")
    t = Topics(ns)
    log = tmp_path / "backlog.jsonl"
    write_backlog(log, BacklogSpec(turns=1_000, sessions=60, seed=18))

    out = c.hivestream("topics", "--namespace", ns, "--partitions", "4").stdout
    assert "created" in out
    c.hivestream("produce", str(log), "--namespace", ns)
    acked = _ingest_events(c, ns, tmp_path / "spool", 40)

    w = c.popen("worker", "--namespace", ns, "--data-dir", str(tmp_path / "w"), "--loglevel", "info", log=tmp_path / "worker.log")
    try:
        wait_until(lambda: _caught_up(c, worker_group(t), [t.hook_events]), 300, "the worker over SASL_SSL")
    finally:
        stop(w)
    assert "total lag 0" in " ".join(c.hivestream("lag", "--namespace", ns).stdout.split())

    # three replicas on every topic of the namespace, the faust changelogs included
    check = c.hivestream("topics", "--namespace", ns, "--check").stdout
    assert "no differences" in check and "replicas 3" in check
    assert "changelog" in check
    rows = [ln for ln in check.splitlines() if ln.startswith("│") and ns in ln]
    assert len(rows) >= 9 and all(ln.split("│")[3].strip() == "3" for ln in rows), check

    db = tmp_path / "kafka.duckdb"
    c.hivestream("project", "--db", str(db), "--namespace", ns, "--idle-exit", "3")
    ingested = [v for _p, _k, v in read_topic(c.plain, t.hook_events) if HookEvent.model_validate_json(v).session == "sasl-ingest"]
    assert {HookEvent.model_validate_json(v).event_id for v in ingested} == set(acked)
    (tmp_path / "ingested.jsonl").write_bytes(b"".join(v + b"\n" for v in ingested))
    ref = tmp_path / "embedded.duckdb"
    c.hivestream("run", str(log), str(tmp_path / "ingested.jsonl"), "--db", str(ref))
    got, want = frame_tables(db), frame_tables(ref)
    assert len(want["frames"]) > 1_800 and any(r[4] == "claude-code" and r[5] == "sasl-ingest" for r in want["frames"])
    assert got == want

    replayed = tmp_path / "replayed.duckdb"
    c.hivestream("replay", "--db", str(replayed), "--namespace", ns)
    assert frame_tables(replayed) == got

    v2 = Topics(ns, "v2")
    r = c.popen("reprocess", "--version", "v2", "--key-strategy", "body+event", "--namespace", ns, "--data-dir", str(tmp_path / "w2"),
                log=tmp_path / "reprocess.log")
    try:
        wait_until(lambda: _caught_up(c, worker_group(v2), [t.hook_events]), 300, "reprocess over SASL_SSL")
    finally:
        stop(r)
    c.hivestream("project", "--frames-version", "v2", "--db", str(tmp_path / "v2.duckdb"), "--namespace", ns, "--idle-exit", "3")
    c.hivestream("run", str(log), str(tmp_path / "ingested.jsonl"), "--key-strategy", "body+event", "--db", str(tmp_path / "v2-ref.duckdb"))
    assert frame_tables(tmp_path / "v2.duckdb") == frame_tables(tmp_path / "v2-ref.duckdb")

    # KnowHub: an experience submitted and approved through Kafka, projected
    kb = tmp_path / "kb.duckdb"
    c.hivestream("kb", "submit", "--kafka", "--namespace", ns, "--task", "rotate the cluster's SCRAM password",
                 "--result", "kafka-configs --alter --add-config SCRAM-SHA-512 then restart the clients", "--agent-id", "ops")
    c.hivestream("kb", "project", "--db", str(kb), "--namespace", ns, "--until-caught-up")
    con = duckdb.connect(str(kb), read_only=True)
    exp = con.execute("SELECT experience_id, status FROM experiences").fetchall()
    con.close()
    assert len(exp) == 1 and exp[0][1] == "pending", exp
    c.hivestream("kb", "approve", exp[0][0], "--kafka", "--namespace", ns, "--reviewer", "tester")
    c.hivestream("kb", "project", "--db", str(kb), "--namespace", ns, "--until-caught-up")
    con = duckdb.connect(str(kb), read_only=True)
    assert con.execute("SELECT status FROM experiences").fetchall() == [("approved",)]
    con.close()

    # memory stubs: topics, produce, worker, project equal `stubs run`
    slog = write_scenario(tmp_path / "stubs.jsonl", stub_scenario(seed=18, n_messages=200))
    embedded(slog, tmp_path / "stubs-ref.duckdb")
    c.hivestream("stubs", "topics", "--namespace", ns, "--partitions", "4")
    c.hivestream("stubs", "produce", str(slog), "--namespace", ns)
    sw = c.popen("stubs", "worker", "--namespace", ns, "--data-dir", str(tmp_path / "sw"), *STUB_POLICY, log=tmp_path / "stubs.log")
    try:
        wait_until(lambda: _caught_up(c, f"{ns}-stubs", [t.stub_events]), 300, "the stub worker over SASL_SSL")
    finally:
        stop(sw)
    c.hivestream("stubs", "project", "--db", str(tmp_path / "stubs.duckdb"), "--namespace", ns, "--until-caught-up", *STUB_POLICY)
    sgot, swant = stub_tables(tmp_path / "stubs.duckdb"), stub_tables(tmp_path / "stubs-ref.duckdb")
    assert swant["stub_matches"]
    assert sgot == swant

    # the SCRAM password never reached an output or a log
    secret = _password(c)
    for f in tmp_path.glob("*.log"):
        assert secret not in f.read_text(errors="replace"), f.name


def _bad_properties(c: LocalCluster, tmp_path: Path, name: str, edit: dict[str, str]) -> Path:
    lines = []
    for ln in c.client_properties.read_text().splitlines():
        key = ln.split("=", 1)[0].strip()
        lines.append(f"{key}={edit.pop(key)}" if key in edit else ln)
    lines += [f"{k}={v}" for k, v in edit.items()]
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return p


def _other_ca(tmp_path: Path) -> Path:
    """A CA the cluster's certificates do not chain to (a copy of the test's own self-signed one)."""
    import subprocess

    ca = tmp_path / "other-ca.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=not the cluster CA",
                    "-keyout", str(tmp_path / "other-ca.key"), "-out", str(ca)], check=True, capture_output=True)
    return ca


@pytest.mark.parametrize("case", ["wrong password", "wrong CA", "mechanism not offered", "plaintext to the SASL_SSL port"])
def test_connection_failures_on_the_cluster_are_one_line_without_secrets(cluster: LocalCluster, tmp_path: Path, case: str) -> None:
    c = cluster
    real = _password(c)
    wrong = "not-the-password-" + real[:4]
    jaas = c.client_properties.read_text().split("sasl.jaas.config=", 1)[1].splitlines()[0]
    edits = {
        "wrong password": {"sasl.jaas.config": jaas.replace(real, wrong)},
        "wrong CA": {"ssl.truststore.location": str(_other_ca(tmp_path))} if case == "wrong CA" else {},
        "mechanism not offered": {"sasl.mechanism": "SCRAM-SHA-256", "sasl.jaas.config": jaas},
        "plaintext to the SASL_SSL port": {"security.protocol": "PLAINTEXT", "sasl.mechanism": "", "sasl.jaas.config": ""},
    }[case]
    if case == "plaintext to the SASL_SSL port":
        props = tmp_path / "plain.properties"
        props.write_text(f"bootstrap.servers={c.sasl}\nsecurity.protocol=PLAINTEXT\n")
    else:
        props = _bad_properties(c, tmp_path, "bad.properties", dict(edits))
    ns = unique_namespace("bad")
    log = tmp_path / "one.jsonl"
    write_backlog(log, BacklogSpec(turns=5, sessions=1, seed=1))
    says = {"wrong password": "authentication", "wrong CA": "certificate", "mechanism not offered": "mechanism",
            "plaintext to the SASL_SSL port": "security.protocol"}[case]
    for args in (["topics", "--namespace", ns], ["produce", str(log), "--namespace", ns], ["lag", "--namespace", ns]):
        t0 = time.monotonic()
        r = c.hivestream(*args, check=False, timeout=180, HIVESTREAM_KAFKA_CONFIG=str(props))
        text = r.stdout + r.stderr
        assert r.returncode not in (0, 1) or args[0] != "lag", text
        assert r.returncode != 0, text
        assert "Traceback" not in text, text
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1, text
        assert says in lines[0].lower(), (case, args[0], lines[0])
        assert real not in text and wrong not in text
        assert time.monotonic() - t0 < 120, f"{args[0]} took {time.monotonic() - t0:.0f} s to give up"


async def _load_client(cid: int, url: str, state: dict[str, float], acked: dict[str, str], durable: list[str]) -> None:
    """POST unique prompts to ``url`` until ``state["stop"]``; each one is retried until answered 200."""
    import asyncio

    import aiohttp

    seq = 0
    async with aiohttp.ClientSession() as http:
        while time.monotonic() < state["stop"]:
            body = {"session_id": f"cluster-load-{cid}", "hook_event_name": "UserPromptSubmit",
                    "prompt": f"client {cid} message {seq} during a broker fault", "event_time_ms": 1_791_000_000_000 + seq}
            while time.monotonic() < state["stop"] + 120:
                try:
                    async with http.post(f"{url}/v1/hooks/claude-code", json=body, timeout=aiohttp.ClientTimeout(total=30)) as r:
                        if r.status == 200:
                            got = await r.json()
                            acked[got["results"][0]["event_id"]] = str(body["prompt"])
                            durable.append(got["durable"])
                            break
                except (TimeoutError, aiohttp.ClientError):
                    pass
                await asyncio.sleep(0.2)
            seq += 1
            # ~4 payloads/s per client, all through the faults: enough to reach every fault (each test
            # asserts > 50 acknowledged), few enough that the catch-up and the comparisons afterwards
            # stay short (at 20/s a fault test acknowledged ~27,000 and CI passed 30 minutes)
            await asyncio.sleep(0.25)


@pytest.mark.parametrize("fault", ["kill -9 of a hook-events leader", "rolling restart", "two brokers down"])
def test_broker_faults_under_load_lose_nothing_acknowledged(cluster: LocalCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            fault: str) -> None:
    """``ingest`` under 8 clients, ``produce`` of an 8,000-event backlog, two workers and the projector
    run while the cluster loses brokers; afterwards every acknowledged payload is on ``hook-events``,
    the workers' group has zero committed lag and the tables equal ``hivestream run`` on the input."""
    import asyncio

    c = cluster
    c.wait_healthy()
    for k, v in c.env().items():
        monkeypatch.setenv(k, v)
    ns = unique_namespace("fault")
    t = Topics(ns)
    log = tmp_path / "backlog.jsonl"
    write_backlog(log, BacklogSpec(turns=FAULT_TURNS, sessions=200, seed=sum(map(ord, fault))))
    c.hivestream("topics", "--namespace", ns, "--partitions", "4")
    logs = tmp_path / "procs.log"
    proc = IngestProc(c.sasl, ns, tmp_path / "spool", "--produce-timeout", "2")
    wlogs = [tmp_path / f"worker-{i}.log" for i in range(2)]
    workers = [c.popen("worker", "--namespace", ns, "--data-dir", str(tmp_path / f"w-{i}"), "--loglevel", "info", log=wl) for i, wl in enumerate(wlogs)]
    db = tmp_path / "kafka.duckdb"
    projector = c.popen("project", "--db", str(db), "--namespace", ns, log=logs)
    # the faults hit running services: both workers have joined their group (faust logs "Ready")
    wait_until(lambda: all("Ready" in wl.read_text(errors="replace") for wl in wlogs), 180, "both workers to be ready")
    acked: dict[str, str] = {}
    durable: list[str] = []
    state = {"stop": time.monotonic() + 3600}
    notes: list[str] = []
    produce_out: dict[str, object] = {}

    async def chaos() -> None:
        await asyncio.sleep(4)
        producing = await asyncio.to_thread(c.hivestream, "produce", str(log), "--namespace", ns, check=False, timeout=600) \
            if fault == "two brokers down" else None
        if fault == "kill -9 of a hook-events leader":
            prod = asyncio.create_task(asyncio.to_thread(c.hivestream, "produce", str(log), "--namespace", ns, check=False, timeout=600))
            await asyncio.sleep(1.5)  # produce has started sending (its preflight and producer id take about a second)
            victim = await asyncio.to_thread(c.leader, t.hook_events, 0)
            await asyncio.to_thread(c.kill, victim)
            notes.append(f"killed {victim} with produce {'done' if prod.done() else 'running'}")
            await asyncio.sleep(15)
            await asyncio.to_thread(c.start_node, victim)
            producing = await prod
        elif fault == "rolling restart":
            prod = asyncio.create_task(asyncio.to_thread(c.hivestream, "produce", str(log), "--namespace", ns, check=False, timeout=600))
            for n in (1, 2, 3):
                await asyncio.to_thread(c.stop_node, n)
                await asyncio.sleep(3)
                await asyncio.to_thread(c.start_node, n)
                await asyncio.to_thread(c.wait_healthy)
                notes.append(f"restarted {n}")
            producing = await prod
        elif fault == "two brokers down":
            assert producing is not None and producing.returncode == 0, producing
            await asyncio.to_thread(c.kill, 2)
            await asyncio.to_thread(c.kill, 3)
            notes.append("killed 2 and 3")
            await asyncio.sleep(12)
            small = tmp_path / "while-down.jsonl"
            write_backlog(small, BacklogSpec(turns=10, sessions=2, short_share=0, bad_every=0, seed=5))
            # a 15 s acknowledgement bound (Kafka's delivery.timeout.ms) instead of the default 120 s: the
            # same one-line exit 2, ~100 s sooner
            down = await asyncio.to_thread(c.hivestream, "produce", str(small), "--namespace", ns, "--delivery-timeout", "15",
                                           check=False, timeout=300)
            produce_out["down"] = down
            await asyncio.to_thread(c.start_node, 2)
            await asyncio.to_thread(c.start_node, 3)
        produce_out["up"] = producing
        await asyncio.to_thread(c.wait_healthy)
        state["stop"] = time.monotonic() + 10

    async def main() -> None:
        await asyncio.gather(chaos(), *(_load_client(i, proc.url, state, acked, durable) for i in range(8)))

    try:
        asyncio.run(main())
        up = produce_out["up"]
        assert getattr(up, "returncode", None) == 0, getattr(up, "stderr", up)
        if fault == "two brokers down":
            down = produce_out["down"]
            text = getattr(down, "stdout", "") + getattr(down, "stderr", "")
            assert "Traceback" not in text, text
            # either the cluster acknowledged (then the records must be on hook-events, checked below with
            # everything else), or produce stopped with one clear line
            if getattr(down, "returncode", 0) != 0:
                assert down.returncode == 2, text  # type: ignore[attr-defined]
                lines = [ln for ln in down.stderr.splitlines() if ln.strip()]  # type: ignore[attr-defined]
                assert len(lines) == 1 and lines[0].startswith("error: "), text
                assert "refused the connection" in text or "insync.replicas" in text or "in-sync replicas" in text, text
                if "did not acknowledge" in text:
                    assert "within 15 s" in text, text  # the bound given, not the default
            notes.append(f"produce while down: exit {getattr(down, 'returncode', None)}; ingest answered {sorted(set(durable))}")
        wait_until(lambda: httpx.get(proc.url + "/healthz", timeout=10).json()["spooled_records"] == 0, 300, "ingest's spool to drain")
        wait_until(lambda: _caught_up(c, worker_group(t), [t.hook_events]), 600, "the workers to catch up")
    finally:
        proc.stop()
        for w in workers:
            stop(w)
        stop(projector)
    assert group_lag(c.plain, worker_group(t), [t.hook_events]) == 0
    c.hivestream("project", "--db", str(db), "--namespace", ns, "--idle-exit", "3")  # the projector resumes from its offsets

    values = [v for _p, _k, v in read_topic(c.plain, t.hook_events)]
    events = [HookEvent.model_validate_json(v) for v in values]
    on_topic = {e.event_id for e in events}
    missing = set(acked) - on_topic
    assert not missing, f"{len(missing)} of {len(acked)} acknowledged payloads are not on hook-events ({notes})"
    backlog_db = tmp_path / "backlog.duckdb"
    c.hivestream("run", str(log), "--db", str(backlog_db))
    con = duckdb.connect(str(backlog_db), read_only=True)
    backlog_ids = {r[0] for r in con.execute("SELECT event_id FROM frame_captures").fetchall()}
    con.close()
    assert len(backlog_ids) == 4 * FAULT_TURNS and backlog_ids <= on_topic, f"{len(backlog_ids - on_topic)} backlog events missing ({notes})"
    # the reference: `hivestream run` on what is durable on hook-events (a retried payload once)
    unique = list({e.event_id: v for e, v in zip(events, values, strict=True)}.values())
    (tmp_path / "durable.jsonl").write_bytes(b"".join(v + b"\n" for v in unique))
    ref = tmp_path / "embedded.duckdb"
    c.hivestream("run", str(tmp_path / "durable.jsonl"), "--db", str(ref))
    got, want = frame_tables(db), frame_tables(ref)
    print(f"\n{fault}: {notes}; {len(acked)} payloads acknowledged, by {sorted(set(durable))}; {len(unique)} events on hook-events")
    assert len(acked) > 50 and len(want["captures"]) >= 4 * FAULT_TURNS + len(acked)
    assert got == want
