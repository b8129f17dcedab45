"""The spool's record format: append-only, checksummed, self-delimiting.

A record is ``MAGIC (4 bytes, b"HSP1") | length (u32 big-endian) | crc32 of the payload (u32 BE)
| payload``. A reader walks a segment record by record; a record whose header or checksum does not
hold (a write torn by a crash, a flipped bit) is skipped by searching for the next ``MAGIC``, and
the skipped byte count is reported so it is never silent.

Payloads of the ingest server's spool are Kafka records: ``topic length (u16 BE) | topic | key
length (u32 BE) | key | value`` (:func:`encode_kafka_record`).
"""

from __future__ import annotations

import struct
import zlib

MAGIC = b"HSP1"
_HEAD = struct.Struct(">4sII")
HEADER_BYTES = _HEAD.size  # 12
MAX_RECORD_BYTES = 64 * 1024 * 1024


def encode_record(payload: bytes) -> bytes:
    """Frame ``payload`` as one spool record (``len(payload) + 12`` bytes).

    Raises:
        ValueError: for a payload over :data:`MAX_RECORD_BYTES`.
    """
    if len(payload) > MAX_RECORD_BYTES:
        raise ValueError(f"spool record of {len(payload)} bytes is over {MAX_RECORD_BYTES}")
    return _HEAD.pack(MAGIC, len(payload), zlib.crc32(payload)) + payload


class Decoded:
    """What :func:`decode_records` read from a buffer (a plain class: no dataclasses import, so
    the command hook that uses this module starts fast).

    Attributes:
        records: the payloads whose checksums hold, in order.
        skipped_bytes: bytes that belonged to no valid record (torn or corrupt).
    """

    __slots__ = ("records", "skipped_bytes")

    def __init__(self, records: list[bytes], skipped_bytes: int) -> None:
        self.records = records
        self.skipped_bytes = skipped_bytes


def decode_records(buf: bytes) -> Decoded:
    """All valid records of ``buf`` in order; invalid stretches are skipped and counted."""
    records: list[bytes] = []
    pos, skipped, n = 0, 0, len(buf)
    while pos < n:
        ok = False
        if pos + HEADER_BYTES <= n:
            magic, length, crc = _HEAD.unpack_from(buf, pos)
            end = pos + HEADER_BYTES + length
            if magic == MAGIC and length <= MAX_RECORD_BYTES and end <= n:
                payload = buf[pos + HEADER_BYTES:end]
                if zlib.crc32(payload) == crc:
                    records.append(payload)
                    pos = end
                    ok = True
        if not ok:
            nxt = buf.find(MAGIC, pos + 1)
            nxt = n if nxt < 0 else nxt
            skipped += nxt - pos
            pos = nxt
    return Decoded(records, skipped)


def encode_kafka_record(topic: str, key: bytes | None, value: bytes) -> bytes:
    """The spool payload of one Kafka record (``key`` ``None`` is stored as empty)."""
    t = topic.encode("utf-8")
    k = key or b""
    return struct.pack(">H", len(t)) + t + struct.pack(">I", len(k)) + k + value


def decode_kafka_record(payload: bytes) -> tuple[str, bytes, bytes]:
    """``(topic, key, value)`` of a payload from :func:`encode_kafka_record`.

    Raises:
        ValueError: when the payload is shorter than its lengths say.
    """
    if len(payload) < 2:
        raise ValueError("spooled Kafka record too short")
    (tl,) = struct.unpack_from(">H", payload, 0)
    if len(payload) < 2 + tl + 4:
        raise ValueError("spooled Kafka record too short for its topic")
    topic = payload[2:2 + tl].decode("utf-8")
    (kl,) = struct.unpack_from(">I", payload, 2 + tl)
    start = 2 + tl + 4
    if len(payload) < start + kl:
        raise ValueError("spooled Kafka record too short for its key")
    return topic, payload[start:start + kl], payload[start + kl:]
