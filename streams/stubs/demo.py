"""The stub demo's log: the sample stub texts and messages embedded with all-MiniLM-L6-v2.

The texts (``hivestream/samples/stubs/texts.json``) were written for this project; the vectors
come from :class:`streams.stubs.embedder.MiniLMEmbedder` (384 dims), so the matches are real
semantic matches, not planted ones.
"""

from __future__ import annotations

import json
from pathlib import Path

from streams.stubs.embedder import DIM, MODEL_NAME, MiniLMEmbedder
from streams.stubs.events import MessageEmbedded, StubUpserted, encode_embedding
from streams.stubs.log import StubEventT

DEMO_CHANNEL = "demo"
START_MS = 1_793_613_600_000  # 2026-11-02T10:00:00Z


def demo_events(texts_json: Path, embedder: MiniLMEmbedder | None = None) -> tuple[list[StubEventT], dict[str, str | None]]:
    """The demo log and, per message id, the stub topic its author meant (``None``: off-topic).

    Stubs get ids 1..n in file order (``archive_tokens`` = 4 tokens per word of the stub text,
    a stand-in for the archive's size); messages follow one minute apart.

    Raises:
        RuntimeError: when the MiniLM extra is not installed (the message says how to install).
        OSError, ValueError: when the texts file cannot be read or parsed.
    """
    doc = json.loads(texts_json.read_text(encoding="utf-8"))
    emb = embedder or MiniLMEmbedder()
    stubs, messages = doc["stubs"], doc["messages"]
    svec = emb.embed([s["text"] for s in stubs])
    mvec = emb.embed([m["text"] for m in messages])
    events: list[StubEventT] = []
    for i, (s, v) in enumerate(zip(stubs, svec, strict=True), start=1):
        events.append(StubUpserted(
            event_id=f"demo-stub-{i}", event_time_ms=START_MS, stub_id=i, channel=DEMO_CHANNEL, title=s["id"],
            stub_text=s["text"], archive_path=f"/memory/archived/{s['id']}.md", archive_tokens=4 * len(s["text"].split()),
            embedding_b64=encode_embedding(v), model=MODEL_NAME, dim=DIM,
        ))
    intended: dict[str, str | None] = {}
    for j, (m, v) in enumerate(zip(messages, mvec, strict=True), start=1):
        mid = f"m{j}"
        intended[mid] = m.get("topic")
        events.append(MessageEmbedded(
            event_id=f"demo-msg-{j}", event_time_ms=START_MS + 60_000 * j, channel=DEMO_CHANNEL, message_id=mid,
            embedding_b64=encode_embedding(v), model=MODEL_NAME, dim=DIM,
        ))
    return events, intended
