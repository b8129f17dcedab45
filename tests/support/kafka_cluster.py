"""A real three-broker Kafka cluster for the tests: ``deploy/kafka/cluster.sh`` in a private state dir.

Each node is a KRaft broker and controller with a PLAINTEXT listener (used only by the tests' own
checks: end offsets, leaders, topic contents) and a SASL_SSL one (SCRAM-SHA-512, a CA made at first
start), default replication factor 3 and ``min.insync.replicas=2``. hivestream's commands get the
SASL_SSL bootstrap and the ``client.properties`` the script writes (Java-client form), nothing else.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kafka import KafkaAdminClient

from tests.support.kafka_broker import _ports_free, broker_script_env

REPO_ROOT = Path(__file__).resolve().parents[2]
CLUSTER_SH = REPO_ROOT / "deploy" / "kafka" / "cluster.sh"
DEFAULT_BASE_PORT = 19192
START_TIMEOUT_S = 600


class ClusterError(RuntimeError):
    """The cluster could not be started or a node could not be started or stopped (the message has cluster.sh's output)."""


@dataclass(frozen=True)
class LocalCluster:
    """A running three-node cluster.

    Attributes:
        home: the state dir (CA, ``client.properties``, one dir per node).
        base_port: ``HIVESTREAM_CLUSTER_PORT`` (see ``cluster.sh`` for the port layout).
        plain: PLAINTEXT bootstrap servers (the tests' own checks).
        sasl: SASL_SSL bootstrap servers (hivestream's commands).
    """

    home: Path
    base_port: int
    plain: str
    sasl: str

    @property
    def client_properties(self) -> Path:
        """The Java-client ``client.properties`` (SASL_SSL, SCRAM-SHA-512, the CA as a PEM truststore)."""
        return self.home / "client.properties"

    @property
    def ca(self) -> Path:
        """The cluster's CA certificate (PEM)."""
        return self.home / "tls" / "ca.pem"

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of a hivestream command on this cluster: the SASL_SSL bootstrap and the
        properties file only (every other ``HIVESTREAM_KAFKA_*`` variable removed)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("HIVESTREAM_KAFKA_")}
        env.update(KAFKA_BOOTSTRAP_SERVERS=self.sasl, HIVESTREAM_KAFKA_CONFIG=str(self.client_properties), PYTHONUNBUFFERED="1")
        env.update(extra)
        return env

    def script(self, *args: str, timeout: float = START_TIMEOUT_S) -> str:
        """Run ``cluster.sh ARGS`` on this cluster; its stdout.

        Raises:
            ClusterError: when it exits non-zero (with its stderr).
        """
        r = subprocess.run(["bash", str(CLUSTER_SH), *args], env=_script_env(self.home, self.base_port), stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=timeout, check=False)
        if r.returncode != 0:
            raise ClusterError(f"cluster.sh {' '.join(args)} failed (exit {r.returncode}):\n{r.stderr.strip()}")
        return r.stdout

    def kill(self, node: int) -> None:
        """SIGKILL broker ``node`` (1..3): a crash, no controlled shutdown."""
        self.script("kill", str(node))

    def stop_node(self, node: int) -> None:
        """Controlled shutdown of broker ``node`` (SIGTERM)."""
        self.script("stop-node", str(node))

    def start_node(self, node: int) -> None:
        """Start broker ``node`` again and wait until it is registered."""
        self.script("start-node", str(node))

    def wait_healthy(self) -> None:
        """Wait until all three brokers are registered and no partition is under-replicated."""
        self.script("wait")

    def leader(self, topic: str, partition: int) -> int:
        """The node id (1..3) leading ``topic``/``partition`` now (kafka-python's admin client, PLAINTEXT)."""
        admin = KafkaAdminClient(bootstrap_servers=self.plain, client_id="test-cluster-leader")
        try:
            for t in admin.describe_topics([topic]):
                for p in t["partitions"]:
                    if p.get("partition_index", p.get("partition")) == partition:  # the Metadata response's field names
                        return int(p.get("leader_id", p.get("leader")))
        finally:
            admin.close()
        raise ClusterError(f"{topic}[{partition}] has no leader")

    def hivestream(self, *args: str, timeout: float = 600, check: bool = True, **env: str) -> subprocess.CompletedProcess[str]:
        """Run ``hivestream ARGS`` with :meth:`env`.

        Raises:
            AssertionError: with its output when ``check`` and it exits non-zero.
        """
        r = subprocess.run([sys.executable, "-m", "hivestream", *args], cwd=REPO_ROOT, env=self.env(**env), capture_output=True,
                           text=True, timeout=timeout, check=False)
        if check:
            assert r.returncode == 0, r.stdout + r.stderr
        return r

    def popen(self, *args: str, log: Path, **env: str) -> subprocess.Popen[bytes]:
        """Start ``hivestream ARGS`` as a process with :meth:`env`, its output appended to ``log``."""
        with log.open("ab") as out:
            return subprocess.Popen([sys.executable, "-m", "hivestream", *args], cwd=REPO_ROOT, env=self.env(**env), stdout=out,
                                    stderr=subprocess.STDOUT)


def _script_env(home: Path, base_port: int) -> dict[str, str]:
    return broker_script_env(HIVESTREAM_CLUSTER_HOME=str(home), HIVESTREAM_CLUSTER_PORT=str(base_port),
                             HIVESTREAM_CLUSTER_WAIT_TIMEOUT="180")


def _pick_base_port() -> int:
    """19192 when its 9 ports (3 per node) are free, else another free block."""
    for base in (DEFAULT_BASE_PORT, 29192, 39192, 49192, 21192, 23192):
        if _ports_free(*(base + off + n for off in (0, 10, 20) for n in range(3))):
            return base
    raise ClusterError("no free block of ports for the cluster on 127.0.0.1")


@contextlib.contextmanager
def local_cluster() -> Iterator[LocalCluster]:
    """Start a three-node cluster in a fresh temporary state dir; yield it; stop it and remove the dir.

    Raises:
        ClusterError: ``cluster.sh start`` failed (no JDK, no openssl, jars not fetched, unhealthy).
    """
    home = Path(tempfile.mkdtemp(prefix="hivestream-cluster-"))
    base = _pick_base_port()
    plain = ",".join(f"127.0.0.1:{base + n}" for n in range(3))
    sasl = ",".join(f"127.0.0.1:{base + 10 + n}" for n in range(3))
    cluster = LocalCluster(home, base, plain, sasl)
    try:
        cluster.script("start")
        yield cluster
    finally:
        with contextlib.suppress(Exception):
            cluster.script("stop", timeout=120)
        shutil.rmtree(home, ignore_errors=True)
