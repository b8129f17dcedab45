"""The frames projection: schema, rows, the DuckDB sink, the projector over ``frames`` /
``memory-calls`` / ``dead-letter``, the named queries, memory analytics and the report's data.
"""
