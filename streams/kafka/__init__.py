"""Everything that talks to Kafka: topic names and specs, the faust app and its #596 delivery
ledger, consumer-group lag, worker directories.
"""
