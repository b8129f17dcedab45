"""The Kafka side of the projectors: the partition reader and the one projector loop every projection runs on."""
