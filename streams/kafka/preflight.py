"""A bounded connection check before a command starts its clients, with the real cause on failure.

Both client libraries report any failed bootstrap as "Unable to bootstrap" (kafka-python after its
bootstrap timeout, 30 s by default), so a command that cannot connect would wait and then print a
cause-less error, or retry for ever. :func:`check_connection` connects to the bootstrap servers one
by one with aiokafka's connection (``aiokafka.conn.create_conn``: the TCP connect, TLS handshake and
SASL authentication every aiokafka client does), asks for the cluster metadata, then connects
once to a broker the metadata advertises (an ``advertised.listeners`` this machine cannot reach
fails there), all within ``timeout_s``; it raises :class:`~streams.kafka.errors.KafkaSetupError`
with :func:`~streams.kafka.errors.explain`'s line for the first failure.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from streams.kafka.clients import aiokafka_kwargs
from streams.kafka.connection import KafkaConnection
from streams.kafka.errors import KafkaSetupError, explain

DEFAULT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class ClusterInfo:
    """What the check learned: the brokers the cluster advertises (``host:port``) and its controller id."""

    brokers: tuple[str, ...]
    controller_id: int | None


async def _connect(host: str, port: int, kw: dict[str, Any], timeout_s: float) -> Any:
    from aiokafka.conn import create_conn

    return await asyncio.wait_for(create_conn(host, port, client_id="hivestream-preflight", request_timeout_ms=int(timeout_s * 1000), **kw),
                                  timeout=timeout_s)


async def probe(conn: KafkaConnection, timeout_s: float = DEFAULT_TIMEOUT_S) -> ClusterInfo:
    """Connect, authenticate and read the metadata as described in the module docstring.

    Raises:
        KafkaSetupError: the one-line cause of the first failure (no secret in it).
    """
    from aiokafka.protocol.metadata import MetadataRequest

    kw = {k: v for k, v in aiokafka_kwargs(conn).items() if k != "bootstrap_servers"}
    deadline = time.monotonic() + timeout_s
    first: tuple[str, BaseException] | None = None
    for host, port in conn.hosts():
        left = max(0.5, deadline - time.monotonic())
        try:
            c = await _connect(host, port, kw, left)
        except Exception as e:
            first = first or (f"{host}:{port}", e)
            continue
        try:
            md = await asyncio.wait_for(c.send(MetadataRequest([])), timeout=max(0.5, deadline - time.monotonic()))
        except Exception as e:
            first = first or (f"{host}:{port}", e)
            continue
        finally:
            c.close()
        brokers = tuple(f"{b[1]}:{b[2]}" for b in md.brokers)
        info = ClusterInfo(brokers, getattr(md, "controller_id", None))
        await _check_advertised(conn, info, kw, deadline, f"{host}:{port}")
        return info
    assert first is not None
    at, exc = first
    raise KafkaSetupError(explain(exc, conn, at=at, timeout_s=timeout_s))


async def _check_advertised(conn: KafkaConnection, info: ClusterInfo, kw: dict[str, Any], deadline: float, via: str) -> None:
    if not info.brokers or via in info.brokers:
        return
    host, _, port = info.brokers[0].rpartition(":")
    try:
        c = await _connect(host, int(port), kw, max(0.5, deadline - time.monotonic()))
    except Exception as e:
        raise KafkaSetupError(f"{via} answered, but the broker it advertises, {info.brokers[0]}, cannot be used from here "
                              f"({explain(e, conn, at=info.brokers[0])}); the brokers' advertised.listeners must be reachable") from None
    c.close()


def check_connection(conn: KafkaConnection, timeout_s: float = DEFAULT_TIMEOUT_S) -> ClusterInfo:
    """:func:`probe` from synchronous code (its own event loop); returns what it learned.

    Raises:
        KafkaSetupError: as :func:`probe`.
    """
    return asyncio.run(probe(conn, timeout_s))
