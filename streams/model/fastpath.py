"""The switch for the import fast path (``HIVESTREAM_FAST_IMPORT``, on unless set to ``0``).

Importing a file, adapting a payload, serialising a hook event and keying it have two
implementations that must give the same result: the model path (the standard-library JSON
decoder, pydantic validation of every :class:`~streams.model.events.HookEvent`, pydantic's serialiser,
the general ``stripHmPrefix`` hash) and the fast path (orjson, events built from fields the
adapter already checked, the body hashed without building its prefix). The fast path falls back
to the model path for every input it does not cover, so both produce the same event ids, record
keys, record values and dead letters; ``tests/streams/test_fast_import.py`` compares them on the corpus
and on the generated backlog. Setting ``HIVESTREAM_FAST_IMPORT=0`` runs the model path only
(a safety switch; tests flip :data:`ENABLED` in-process).
"""

from __future__ import annotations

import os

ENABLED: bool = os.environ.get("HIVESTREAM_FAST_IMPORT", "1").strip() != "0"
"""True when the fast path is used; read once at import time. Modules read it as
``fastpath.ENABLED`` on each call, so a test can switch it."""
