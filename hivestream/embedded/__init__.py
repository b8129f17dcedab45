"""The embedded runner (``hivestream run``): the frames pipeline and the KnowHub pipeline over
files into DuckDB, no broker.
"""
