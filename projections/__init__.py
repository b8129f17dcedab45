"""hivestream's DuckDB side: schema, folds of events into rows, the batch sink, named queries."""
