"""The versioned hook event and everything that turns bytes into one: the event model and its
builders, the ``[hm …]`` prefix and the body hash (hive-mind's), JavaScript string rules, time
parsing, decoding, dead letters, the clock, key groups, record positions. Pure, no I/O.
"""
