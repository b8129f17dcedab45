"""Kafka as users run it, on the real single broker: one-line errors for connections that cannot work, topics
created with the configured replication, ``topics --check``, and a worker that refuses a
``hook-events`` whose partition count differs from its state's."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from streams.kafka.topic_check import describe_topics
from streams.kafka.topics import Topics, TopicSpec, ensure_topics
from tests.support.kafka_harness import unique_namespace

REPO_ROOT = Path(__file__).resolve().parents[2]
SAMPLE = REPO_ROOT / "hivestream" / "samples" / "demo-memory-tools.jsonl"
CLEAN = {k: v for k, v in os.environ.items() if not k.startswith("HIVESTREAM_KAFKA") and k != "KAFKA_BOOTSTRAP_SERVERS"}


def cli(*args: str, env: dict[str, str] | None = None, timeout: int = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hivestream", *args], cwd=REPO_ROOT, env={**CLEAN, **(env or {})}, capture_output=True,
                          text=True, timeout=timeout)


def one_line_error(r: subprocess.CompletedProcess[str]) -> str:
    """The single stderr line of a failed command (asserting exit 2 and no traceback)."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    return lines[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("args", [
    ["topics"], ["topics", "--check"], ["produce", str(SAMPLE)], ["lag"], ["worker", "--store", "memory://"],
    ["project", "--idle-exit", "1"], ["replay", "--db", "unused.duckdb"], ["stubs", "topics"], ["kb", "project", "--idle-exit", "1"],
])
def test_unreachable_broker_is_one_line(args: list[str], tmp_path: Path) -> None:
    port = free_port()
    line = one_line_error(cli(*args, "--bootstrap", f"127.0.0.1:{port}", env={"HOME": str(tmp_path)}))
    assert f"no Kafka broker at 127.0.0.1:{port} (connection refused)" in line and "--bootstrap" in line


@pytest.mark.kafka
def test_settings_the_broker_cannot_take_are_one_line(kafka_bootstrap: str, tmp_path: Path) -> None:
    gssapi = tmp_path / "gssapi.properties"
    gssapi.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\nsasl.kerberos.service.name=kafka\n", encoding="utf-8")
    line = one_line_error(cli("topics", "--bootstrap", kafka_bootstrap, "--kafka-config", str(gssapi)))
    assert "sasl.mechanism=GSSAPI" in line and "sasl.kerberos.service.name" in line and str(gssapi) in line

    missing = one_line_error(cli("produce", str(SAMPLE), env={"KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
                                                              "HIVESTREAM_KAFKA_CONFIG": str(tmp_path / "nope.properties")}))
    assert "cannot read the Kafka client properties file" in missing and "HIVESTREAM_KAFKA_CONFIG" in missing

    sasl_on_plain = {"KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap, "HIVESTREAM_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
                     "HIVESTREAM_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512", "HIVESTREAM_KAFKA_SASL_USERNAME": "alice",
                     "HIVESTREAM_KAFKA_SASL_PASSWORD": "Secret-On-Plaintext-1"}
    r = cli("topics", env=sasl_on_plain)
    assert "does not expect SASL" in one_line_error(r) and "Secret-On-Plaintext-1" not in r.stderr + r.stdout

    tls_on_plain = one_line_error(cli("lag", env={"KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap, "HIVESTREAM_KAFKA_SECURITY_PROTOCOL": "SSL"}))
    assert "closed the connection during the handshake" in tls_on_plain and "HIVESTREAM_KAFKA_SECURITY_PROTOCOL" in tls_on_plain

    too_many = one_line_error(cli("topics", "--bootstrap", kafka_bootstrap, "--namespace", unique_namespace("rf"), "--replication-factor", "3"))
    assert "refused the replication factor" in too_many and "--replication-factor" in too_many


@pytest.mark.kafka
def test_replication_settings_reach_every_created_topic_and_check_names_differences(kafka_bootstrap: str) -> None:
    ns = unique_namespace("repl")
    env = {"KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap, "HIVESTREAM_REPLICATION_FACTOR": "1", "HIVESTREAM_MIN_INSYNC_REPLICAS": "1"}
    r = cli("topics", "--namespace", ns, "--partitions", "3", env=env)
    assert r.returncode == 0, r.stderr
    specs = Topics(ns).specs(3)
    states = describe_topics(kafka_bootstrap, [s.name for s in specs])
    assert sorted(states) == sorted(s.name for s in specs)
    assert {(st.replicas, st.configs["min.insync.replicas"]) for st in states.values()} == {(1, "1")}
    assert states[Topics(ns).hook_events].partitions == 3

    ok = cli("topics", "--check", "--namespace", ns, "--partitions", "3", env=env)
    assert ok.returncode == 0 and "no differences" in ok.stdout, ok.stdout + ok.stderr
    bad = cli("topics", "--check", "--namespace", ns, "--partitions", "5", env={"KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap})
    assert bad.returncode == 1, bad.stdout + bad.stderr
    diffs = [ln for ln in bad.stdout.splitlines() if ln.startswith("difference:")]
    assert f"difference: {Topics(ns).hook_events}: 3 partitions, expected 5 (--partitions / HIVESTREAM_PARTITIONS)" in diffs
    assert len(diffs) == 5  # the five topics of 3 partitions (the dead-letter topics have 1 as expected)
    again = describe_topics(kafka_bootstrap, [Topics(ns).hook_events])[Topics(ns).hook_events]
    assert again.partitions == 3  # never altered


@pytest.mark.kafka
def test_broker_default_replication_is_used_when_unset(kafka_bootstrap: str) -> None:
    ns = unique_namespace("rfdef")
    created = ensure_topics(kafka_bootstrap, [TopicSpec(f"{ns}.t", 2)])
    assert created == [f"{ns}.t"]
    st = describe_topics(kafka_bootstrap, [f"{ns}.t"])[f"{ns}.t"]
    assert (st.partitions, st.replicas) == (2, 1)  # the single broker's default.replication.factor


@pytest.mark.kafka
def test_worker_refuses_hook_events_with_other_partitions_than_its_state(kafka_bootstrap: str, tmp_path: Path) -> None:
    ns = unique_namespace("refuse")
    t = Topics(ns)
    ensure_topics(kafka_bootstrap, [*t.specs(4), TopicSpec(f"{ns}-dedup-dedup-state-changelog", 2, {"cleanup.policy": "compact"})])
    line = one_line_error(cli("worker", "--bootstrap", kafka_bootstrap, "--namespace", ns, "--store", "memory://",
                              "--data-dir", str(tmp_path / "w")))
    assert "the worker refuses to start" in line and f"{t.hook_events} has 4 partitions" in line
    assert f"{ns}-dedup-dedup-state-changelog" in line and "has 2" in line
    assert f"{ns}-dedup-__assignor-__leader" not in describe_topics(kafka_bootstrap, [f"{ns}-dedup-__assignor-__leader"])  # nothing created
