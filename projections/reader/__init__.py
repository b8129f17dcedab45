"""The Kafka readers the projectors share: the batched consumer and the seek-to-position step.
"""
