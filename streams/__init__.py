"""hivestream's stream side: event models, adapters, prefix and hash, the dedup core, topics and agents.

Everything here except the Kafka/faust modules is pure Python with no I/O, shared by the
embedded runner and the Kafka workers (docs/design.md#the-flow).
"""
