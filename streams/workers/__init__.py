"""The faust workers, each a step on :class:`streams.kafka.partitioned_worker.PartitionedWorker`:
:mod:`.frames` reads ``hook-events`` (frames dedup, KnowHub derivation, memory tool calls),
:mod:`.stubs` reads the stub logs. They move bytes between topics; every decision is made by the
pipelines' pure code.
"""
