"""A real Kafka broker for the tests, from whichever source this machine has.

``kafka_broker()`` picks, in order:

1. ``KAFKA_BOOTSTRAP_SERVERS`` from the environment: an existing broker; nothing
   is started or stopped.
2. A Docker engine that answers: testcontainers' ``KafkaContainer`` (KRaft),
   stopped afterwards.
3. Otherwise ``deploy/kafka/kafka.sh``: a single-node Apache Kafka broker run
   from Maven Central jars with the local JDK, in a private temporary state
   directory, stopped afterwards (only that broker: it is found by the pid file
   in that directory).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
KAFKA_SH = REPO_ROOT / "deploy" / "kafka" / "kafka.sh"
DEFAULT_PORT = 19092
# Confluent image: testcontainers' KafkaContainer drives the Confluent image's
# startup scripts, so an apache/kafka image does not work with it.
DEFAULT_CONTAINER_IMAGE = "confluentinc/cp-kafka:7.6.0"
# Covers a first-time jar fetch through Maven plus kafka.sh's own 90 s wait.
START_TIMEOUT_S = 600


class KafkaBrokerError(RuntimeError):
    """A broker could not be started (the message carries the log's tail)."""


def docker_available(timeout: float = 3.0) -> bool:
    """Return True if a Docker engine answers a ping within ``timeout`` seconds.

    Never raises: a missing ``docker`` package, socket or daemon gives False.
    """
    try:
        import docker

        client = docker.from_env(timeout=timeout)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:
        return False


def _ports_free(*ports: int) -> bool:
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def broker_script_env(**more: str) -> dict[str, str]:
    """The environment for ``deploy/kafka/kafka.sh`` / ``cluster.sh`` as the suite runs them: ``os.environ``
    plus ``more``, with ``HIVESTREAM_KAFKA_JVM_OPTS`` defaulting to ``-XX:TieredStopAtLevel=1`` (C1 only).

    The suite's brokers live minutes and move little data: measured on a 2-core machine, a broker
    without C2 took 5.4 s of CPU to start instead of 13.6 s and 28 s instead of 44 s for the backlog
    and Kafka-path tests, in about the same wall time. A value set in the environment wins.
    """
    return dict(os.environ, HIVESTREAM_KAFKA_JVM_OPTS=os.environ.get("HIVESTREAM_KAFKA_JVM_OPTS", "-XX:TieredStopAtLevel=1"), **more)


def _pick_port() -> int:
    """The default port if it and port+1 (controller) are free, else a free pair."""
    if _ports_free(DEFAULT_PORT, DEFAULT_PORT + 1):
        return DEFAULT_PORT
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port < 65535 and _ports_free(port, port + 1):
            return port
    raise KafkaBrokerError("no free pair of TCP ports on 127.0.0.1")


@contextlib.contextmanager
def local_broker(port: int | None = None) -> Iterator[str]:
    """Run ``deploy/kafka/kafka.sh`` in a fresh temporary state dir; yield its bootstrap.

    Yields ``"127.0.0.1:<port>"`` once the broker answers. ``port`` defaults to
    ``HIVESTREAM_KAFKA_PORT``, else 19092 when free, else a free port (the
    controller takes port+1). On exit the broker is stopped (SIGTERM, then
    SIGKILL after a timeout) and the state dir removed.

    Raises:
        KafkaBrokerError: ``kafka.sh start`` failed or timed out (no JDK, Maven
            could not fetch the jars, the broker did not become healthy, ...).
    """
    if port is None:
        env_port = os.environ.get("HIVESTREAM_KAFKA_PORT")
        port = int(env_port) if env_port else _pick_port()
    state_dir = tempfile.mkdtemp(prefix="hivestream-kafka-")
    env = broker_script_env(HIVESTREAM_KAFKA_HOME=state_dir, HIVESTREAM_KAFKA_PORT=str(port))

    def run(command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", str(KAFKA_SH), command],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT_S,
            check=False,
        )

    try:
        try:
            started = run("start")
        except subprocess.TimeoutExpired as exc:
            raise KafkaBrokerError(
                f"kafka.sh start timed out after {START_TIMEOUT_S}s{_log_tail(state_dir)}"
            ) from exc
        if started.returncode != 0:
            raise KafkaBrokerError(
                f"kafka.sh start failed (exit {started.returncode}):\n"
                f"{started.stderr.strip()}{_log_tail(state_dir)}"
            )
        yield f"127.0.0.1:{port}"
    finally:
        # Only this state dir's pid file is used: stops only what we started.
        run("stop")
        shutil.rmtree(state_dir, ignore_errors=True)


def _log_tail(state_dir: str, lines: int = 40) -> str:
    log = Path(state_dir) / "logs" / "server.log"
    if not log.is_file():
        return ""
    tail = log.read_text(errors="replace").splitlines()[-lines:]
    return "\n--- server.log (tail) ---\n" + "\n".join(tail)


@contextlib.contextmanager
def container_broker(image: str | None = None) -> Iterator[str]:
    """Run testcontainers' ``KafkaContainer`` in KRaft mode; yield its bootstrap string.

    ``image`` defaults to ``HIVESTREAM_KAFKA_TC_IMAGE`` or a Confluent cp-kafka
    image (the only kind KafkaContainer supports). The container is stopped on exit.

    Raises:
        ImportError: testcontainers is not installed.
        Exception: whatever testcontainers/docker raise when the container
            cannot be started (image pull failure, startup timeout, ...).
    """
    try:
        from testcontainers.community.kafka import KafkaContainer
    except ImportError:  # testcontainers < 4.14 keeps it here
        from testcontainers.kafka import KafkaContainer

    image = image or os.environ.get("HIVESTREAM_KAFKA_TC_IMAGE", DEFAULT_CONTAINER_IMAGE)
    with KafkaContainer(image).with_kraft() as container:
        yield container.get_bootstrap_server()


@contextlib.contextmanager
def kafka_broker() -> Iterator[str]:
    """Provide a running Kafka broker; yield its bootstrap string ("host:port").

    Uses ``KAFKA_BOOTSTRAP_SERVERS`` when set (starts nothing), else a Docker
    container via testcontainers when a Docker engine answers, else a local
    broker via ``deploy/kafka/kafka.sh`` (JDK + Maven). Whatever this starts is
    stopped on exit, and nothing else.

    Raises:
        KafkaBrokerError: the local broker could not be started.
        Exception: from testcontainers/docker when the container path fails.
    """
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip()
    if bootstrap:
        yield bootstrap
        return
    source = container_broker if docker_available() else local_broker
    with source() as bootstrap:
        yield bootstrap
