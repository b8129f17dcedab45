"""The front door's pure half onto ``hook-events``: one import item → its record key and value
(:mod:`.keys`, :mod:`.encode`), the line fast path, the import processes, and the sender
(:mod:`.producer`). Dependencies run one way: producer → import_pool → fast_records → encode → keys.
"""
