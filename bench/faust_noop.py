"""The faust floor: an agent that iterates ``<ns>.hook-events`` and does nothing else.

Built by the same :func:`streams.kafka.faust_app.make_faust_app` as the hivestream worker (same
settings, same fixes), so ``worker rate / this rate`` is what hivestream's per-record work costs on
top of faust's own per-event machinery. Usage: ``python bench/faust_noop.py NAMESPACE GROUP``
(runs until stopped).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import faust

from streams.kafka.connection import resolve_connection
from streams.kafka.faust_app import internal_specs, make_faust_app, run_app
from streams.kafka.topics import ensure_topics
from streams.settings import Settings


def main() -> None:
    """Run the no-op agent of group ``argv[2]`` on ``<argv[1]>.hook-events``."""
    namespace, group = sys.argv[1], sys.argv[2]
    conn = resolve_connection()
    app = make_faust_app(group, Settings(), connection=conn, store="memory://local", partitions=4, data_dir=None)
    ensure_topics(conn, internal_specs(app))  # faust creates no topic (its leader topic here)
    topic = app.topic(f"{namespace}.hook-events", internal=False)

    @app.agent(topic)
    async def noop(stream: faust.StreamT[bytes]) -> AsyncIterator[None]:
        async for _event in stream.events():
            yield None

    sys.argv = [sys.argv[0], "worker"]
    run_app(app)


if __name__ == "__main__":
    main()
