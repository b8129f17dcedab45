"""Memory stubs live on the Kafka path: ``hivestream ingest`` keeps the current stubs from ``stub-events``.

Every ingest instance reads *every* partition of ``<ns>.stub-events`` (no consumer group, from the
beginning, like Kafka Streams' ``GlobalKTable``) in a background thread
(:class:`StubTopicFollower`) and applies each stub state event to its live matcher
(:class:`~hivestream.services.stubs.StubService`, the one serve uses); a global stub's broadcast
copies count once (:func:`streams.stubs.routing.followed_state_event`). Prompts are matched at the
front door by :class:`KafkaStubDoor` exactly as serve's door matches them; the ``message-embedded``
and ``stub-matched`` events go onto ``stub-events`` keyed by channel (the partition
``hivestream stubs produce`` picks), made durable with the hook's own records, so ``stubs worker``
and ``stubs project`` fold them.

It fails open: no ``stub-events`` topic yet, or a broker it cannot reach, is one log line (repeated
only when the cause changes); the follower tries again every ``retry_s`` seconds, resuming each
partition where it stopped, and meanwhile prompts are matched against the stubs it has (none at
first: no context, nothing recorded), never held up.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from hivestream.services.stub_door import StubDoor
from hivestream.services.stub_serve import StubsLive, start_service
from hivestream.services.stubs import StubService
from streams.kafka.connection import ConnectionLike
from streams.stubs.routing import followed_state_event
from streams.stubs.settings import MatchPolicy

log = logging.getLogger("hivestream.ingest.stubs")

RETRY_S = 5.0
"""Seconds between tries to find the topic or reach the broker."""
CLIENT_ID = "hivestream-ingest-stubs"
"""The follower's Kafka ``client.id`` (and the prefix of its reader thread's name)."""


class StubTopicFollower:
    """Keeps ``service``'s stubs equal to ``topic``'s stub state events, in a daemon thread.

    Args:
        service: the live matcher to keep current.
        conn: the Kafka connection.
        topic: the ``stub-events`` topic.
        retry_s: seconds between tries when the topic is missing or the broker unreachable (> 0).
    """

    def __init__(self, service: StubService, conn: ConnectionLike, topic: str, *, retry_s: float = RETRY_S) -> None:
        self.service = service
        self.conn = conn
        self.topic = topic
        self.retry_s = retry_s
        self.state = "starting"
        """``starting``, ``following``, ``no topic`` or ``broker unreachable``."""
        self.records = 0
        """Records read from the topic."""
        self.applied = 0
        """Stub state events applied (a global stub's broadcast once)."""
        self._next: dict[int, int] = {}  # partition -> next offset to read
        self._stop = threading.Event()
        self._said = ""
        self._thread = threading.Thread(target=self._run, name="hivestream-stub-follower", daemon=True)

    def start(self) -> None:
        """Start following (returns at once). aiokafka's own log lines from the follower's reader are left out: the follower
        says the cause once (:class:`_QuietReader`)."""
        logging.getLogger("aiokafka").addFilter(_QuietReader())
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop following and wait for the thread (up to ``timeout_s`` seconds)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def stats(self) -> dict[str, Any]:
        """The follower's state for ``/healthz``: topic, state, records read, state events applied, live stubs."""
        return {"topic": self.topic, "state": self.state, "records": self.records, "applied": self.applied, "live": len(self.service.stubs)}

    def _say(self, state: str, line: str) -> None:
        self.state = state
        if line != self._said:
            self._said = line
            log.warning("memory stubs live: %s", line)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._follow()
            except Exception as e:  # the broker went away, a reader failed: one line, then again from where it stopped
                name = type(e).__name__
                detail = (str(e).splitlines() or [""])[0].removeprefix(f"{name}: ")[:200]
                self._say("broker unreachable", f"cannot read {self.topic} ({name}: {detail}); prompts are matched against the "
                                               f"stubs read so far; trying again every {self.retry_s:g} s")
            self._stop.wait(self.retry_s)

    def _follow(self) -> None:
        from projections.reader.consumer import PartitionReader, TopicPartition

        reader = PartitionReader(self.conn, client_id=CLIENT_ID)
        try:
            try:
                parts = reader.partitions(self.topic, timeout_s=self.retry_s)
            except RuntimeError:
                self._say("no topic", f"no topic {self.topic} yet (`hivestream stubs topics` or `stubs produce` creates it); prompts get "
                                      "no stub context until it has stubs")
                return
            tps = [TopicPartition(self.topic, p) for p in parts]
            reader.assign(tps)
            for tp in tps:
                if tp.partition in self._next:
                    reader.seek(tp, self._next[tp.partition])
                else:
                    reader.seek_to_beginning(tp)
            if self.state != "following":
                self._said = ""
                log.info("memory stubs live: following %s (%d partitions)", self.topic, len(tps))
            self.state = "following"
            while not self._stop.is_set():
                for tp, recs in reader.poll(timeout_ms=500).items():
                    for rec in recs:
                        self._feed(tp.partition, rec.value)
                    self._next[tp.partition] = recs[-1].offset + 1
        finally:
            reader.close()

    def _feed(self, partition: int, value: bytes | None) -> None:
        self.records += 1
        ev = followed_state_event(partition, value) if value else None
        if ev is not None:
            self.service.stub_event(ev)
            self.applied += 1


class _QuietReader(logging.Filter):
    """Drops the log records of the follower's reader thread (``hivestream-ingest-stubs-fetch``), which retries every few seconds."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.threadName or "").startswith(CLIENT_ID)


class KafkaStubDoor(StubDoor):
    """:class:`~hivestream.services.stub_door.StubDoor` of ``hivestream ingest``: its stats carry the follower's."""

    def __init__(self, service: StubService, topic: str, follower: StubTopicFollower) -> None:
        super().__init__(service, topic)
        self.follower = follower

    def stats(self) -> dict[str, Any]:
        """The matcher's counts plus ``"follower"``: :meth:`StubTopicFollower.stats`."""
        return {**super().stats(), "follower": self.follower.stats()}

    def close(self) -> None:
        """Stop the follower and the matcher's threads."""
        self.follower.stop()
        self.service.close()


def kafka_stub_door(conn: ConnectionLike, topic: str, budget_s: float, policy: MatchPolicy) -> tuple[KafkaStubDoor | None, str]:
    """The door of ``hivestream ingest`` (its follower made, not started) and the line ingest says about it; ``None`` and why
    when no embedder can be made (:func:`~hivestream.services.stub_serve.start_service`: the same embedder setting as serve).

    Args:
        conn: the Kafka connection; topic: ``stub-events``; budget_s: seconds a prompt waits for its context (> 0);
        policy: the match settings (the stub worker's, so that the door shows what the worker counts).
    """
    service, note = start_service(StubsLive(budget_s=budget_s, refresh_at=None))
    if service is None:
        return None, note
    service.reset_stubs([], policy)
    follower = StubTopicFollower(service, conn, topic)
    return KafkaStubDoor(service, topic, follower), note.replace("; no nightly refresh", f"; stubs followed from {topic}")
