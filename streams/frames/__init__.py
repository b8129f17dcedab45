"""The frames pipeline: captures of conversation turns deduplicated into memory frames.

Pure core: :mod:`~streams.frames.capture` (hook event → capture: prefix, hash, key),
:mod:`~streams.frames.dedup` (the per-key window with key-group watermarks),
:mod:`~streams.frames.routing` (what one hook event becomes, on every path), :mod:`~streams.frames.codec`
(the ``frames`` topic records). Kafka worker: :mod:`~streams.workers.frames` (faust). Projection:
``projections/frames/rows.py``, ``projections/frames/projection.py``, ``projections/frames/projector.py``; embedded runner:
``hivestream/embedded/frames.py``.
"""
