"""Where a KnowHub event made on the command line goes (``kb submit|approve|reject``): produced to
``experience-events`` (``--kafka``), sent through the ``hivestream serve`` holding the file (its log),
or appended to the file's own event log ``<db>.kb-events.jsonl`` and applied at once
(:mod:`hivestream.embedded.experience_log`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb

from hivestream.embedded.experience_log import CannotOpen, LogShortened, NotApplied, append_event, event_log
from hivestream.serve.event_client import NotSent, running_serve, send
from streams.experiences.events import ExperienceEvent, ExperienceReviewed, kb_key
from streams.kafka.connection import ConnectionLike
from streams.kafka.topics import Topics


class NotEmitted(Exception):
    """The event went nowhere; one line saying why and what to do."""


@dataclass(frozen=True)
class Emitted:
    """Where the event went (one phrase), and a note to show beside it (or ``None``)."""

    where: str
    note: str | None = None


def emit_to_kafka(ev: ExperienceEvent, conn: ConnectionLike, topics: Topics) -> Emitted:
    """Produce ``ev`` to ``experience-events`` (keyed by :func:`streams.experiences.events.kb_key`) and wait for the acknowledgement.

    Raises:
        Exception: the Kafka client's errors (the CLI explains them in one line).
    """
    from streams.produce.producer import make_producer

    p = make_producer(conn, client_id="hivestream-kb")
    try:
        p.send(topics.experience_events, key=kb_key(ev), value=ev.model_dump_json().encode()).get(timeout=30)
    finally:
        p.close()
    return Emitted(topics.experience_events)


def emit_to_file(ev: ExperienceEvent, db: Path) -> Emitted:
    """Send ``ev`` through the serve holding ``db``, or append it to ``db``'s event log and apply it.

    Raises:
        NotEmitted: held by another process and no serve names it, serve refused it, or the log or
            the file could not take it (one line; nothing was written unless it says so).
    """
    line = ev.model_dump_json().encode()
    try:
        done = append_event(db, line)
    except CannotOpen as e:  # held: by a serve (the event goes through it), or by another process
        note = running_serve(db)
        if note is None:
            raise NotEmitted(f"cannot open {db} ({e}) and no running hivestream serve names it in {db}.serve: nothing was written (if "
                             f"`hivestream kb project` holds it, send the event with --kafka; else retry when the process holding it is done)") from None
        try:
            sent = send(db, note, line, review=isinstance(ev, ExperienceReviewed))
        except NotSent as ns:
            raise NotEmitted(str(ns)) from None
        return Emitted(f"hivestream serve (pid {sent.pid}), applied" if sent.applied else
                       f"hivestream serve (pid {sent.pid}): durable in its log, not applied yet (its loop is behind; it applies it in order)")
    except (LogShortened, NotApplied, OSError) as e:
        raise NotEmitted(str(e)) from None
    except duckdb.Error as e:
        raise NotEmitted(f"{db} could not apply the event; it is in {event_log(db)} and `hivestream kb run {event_log(db)} --db {db}` applies it: "
                         f"{type(e).__name__}: {str(e).splitlines()[0]}") from None
    torn = None
    if done.torn_bytes:
        torn = (f"the last line of {done.log} had no line end ({done.torn_bytes} bytes: a write cut by a crash); it stays a line of its own "
                f"(dead-lettered unless it is a whole event) and so does this event")
    return Emitted(str(done.log), torn)
