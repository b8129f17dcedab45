"""Anchor: the same dedup job written with Quix Streams (the ``bench`` extra; never a runtime dependency).

Reads ``<ns>.hook-events`` (the serialised hook events ``hivestream produce`` wrote), parses each
record, strips the ``[hm …]`` prefix, trims, hashes the body with SHA-256, re-keys by the hash
(``group_by``: a repartition topic), keeps each key's window anchor in Quix's RocksDB state (with
its changelog topic) and produces created / touched records. At-least-once, as the hivestream worker.
Usage: ``python bench/quix_dedup.py BOOTSTRAP NAMESPACE GROUP STATE_DIR`` (runs until stopped).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from typing import Any

from quixstreams import Application, State

WINDOW_MS = 600_000
_PREFIX = re.compile(r"^\[hm [^\]]*\]\s*")


def capture(value: bytes) -> dict[str, Any] | None:
    """The capture of one hook-event record (None for events without turn text or bad records)."""
    try:
        ev = json.loads(value)
    except ValueError:
        return None
    text = ev.get("content") or ev.get("body")
    if not isinstance(text, str) or not ev.get("event_time_ms"):
        return None
    body = _PREFIX.sub("", text).strip()
    if not body:
        return None
    return {"key": hashlib.sha256(body.encode()).hexdigest(), "t": ev["event_time_ms"], "id": ev.get("event_id")}


def dedup(c: dict[str, Any], state: State) -> dict[str, Any]:
    """First writer wins within the window anchored at the key's first capture."""
    anchor = state.get("anchor")
    if anchor is not None and abs(c["t"] - anchor) <= WINDOW_MS:
        return {**c, "kind": "touched", "frame_time_ms": anchor}
    state.set("anchor", c["t"])
    return {**c, "kind": "created", "frame_time_ms": c["t"]}


def main() -> None:
    """Run the job until stopped."""
    bootstrap, namespace, group, state_dir = sys.argv[1:5]
    app = Application(broker_address=bootstrap, consumer_group=group, auto_offset_reset="earliest", state_dir=state_dir,
                      processing_guarantee="at-least-once", commit_interval=1.0)
    src = app.topic(f"{namespace}.hook-events", value_deserializer="bytes", key_deserializer="bytes")
    out = app.topic(f"{namespace}.quix-frames-{group}", value_serializer="json")
    sdf = app.dataframe(src)
    sdf = sdf.apply(capture).filter(lambda c: c is not None)
    sdf = sdf.group_by(lambda c: c["key"], name="body-hash")
    sdf = sdf.apply(dedup, stateful=True)
    sdf.to_topic(out)
    app.run()


if __name__ == "__main__":
    main()
