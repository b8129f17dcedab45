"""The memory-stub match projection: schema, sink, projector over the stub outputs, queries.
"""
