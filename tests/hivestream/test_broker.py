"""Smoke test against a real Kafka broker: admin, produce, consume."""

import time
import uuid

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic


@pytest.mark.kafka
def test_create_topic_produce_and_consume_roundtrip(kafka_bootstrap):
    topic = f"hivestream-test-{uuid.uuid4().hex}"
    key, value = b"key-" + topic.encode(), b'{"hello": "hive"}'

    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap, client_id="hivestream-test-admin")
    try:
        admin.create_topics([NewTopic(name=topic, num_partitions=1, replication_factor=1)])
        assert topic in admin.list_topics()

        producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
        try:
            sent = producer.send(topic, key=key, value=value).get(timeout=30)
        finally:
            producer.close(timeout=10)
        assert (sent.topic, sent.partition, sent.offset) == (topic, 0, 0)

        consumer = KafkaConsumer(
            topic,
            bootstrap_servers=kafka_bootstrap,
            group_id=f"hivestream-test-{uuid.uuid4().hex}",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        try:
            records = []
            deadline = time.monotonic() + 60
            while not records and time.monotonic() < deadline:
                for batch in consumer.poll(timeout_ms=1000).values():
                    records.extend(batch)
            consumer.commit()
        finally:
            consumer.close()

        assert [(r.topic, r.offset, r.key, r.value) for r in records] == [(topic, 0, key, value)]
    finally:
        try:
            admin.delete_topics([topic])
        finally:
            admin.close()
