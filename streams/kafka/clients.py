"""Every Kafka client hivestream makes, built from one :class:`~streams.kafka.connection.KafkaConnection`.

The builders turn a connection into each library's settings (:func:`aiokafka_kwargs`,
:func:`kafka_python_kwargs`, :func:`faust_broker` and :func:`faust_credentials`, with one TLS
context for all), and the constructors here are the only calls of ``KafkaProducer``,
``KafkaConsumer``, ``KafkaAdminClient``, ``AIOKafkaProducer``, ``AIOKafkaConsumer`` and ``faust.App``
in hivestream (tests/streams/test_kafka_connection.py checks the source tree), so no command can be left
behind. Passwords are handed to the libraries as a string whose repr is ``'***'`` (kafka-python
logs its whole configuration at debug level).

OAUTHBEARER tokens come from the ``module:callable`` of ``oauth_token_provider``: a callable
without arguments returning a token, or ``(token, expiry_ms)`` as ``aws_msk_iam_sasl_signer``'s
``MSKAuthTokenProvider.generate_auth_token(region)`` does (then the token is reused until a
minute before it expires); it is wrapped in aiokafka's and kafka-python's provider classes.
"""

from __future__ import annotations

import asyncio
import importlib
import ssl
import time
from collections.abc import Callable
from typing import Any

from pydantic import SecretStr

from streams.kafka.connection import ConnectionLike, KafkaConnection, SaslMechanism, as_connection
from streams.kafka.errors import KafkaSetupError


class _Hidden(str):
    """A password handed to a client library: the string itself, but ``'***'`` in a repr (and so in a logged dict)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "'***'"


def _secret(s: SecretStr | None) -> str | None:
    return None if s is None else _Hidden(s.get_secret_value())


_CONTEXTS: dict[KafkaConnection, ssl.SSLContext] = {}


def ssl_context(conn: KafkaConnection) -> ssl.SSLContext | None:
    """The TLS context of ``conn`` (None without TLS): the CA file or the system's CAs, the client
    certificate and key, host name checking (aiokafka's ``create_ssl_context``). Made once per connection.

    Raises:
        KafkaSetupError: a file that is missing or not PEM, or a wrong key password.
    """
    if not conn.uses_tls:
        return None
    cached = _CONTEXTS.get(conn)
    if cached is not None:
        return cached
    from aiokafka.helpers import create_ssl_context

    try:
        ctx: ssl.SSLContext = create_ssl_context(cafile=conn.ssl_ca_location)
    except (OSError, ssl.SSLError) as e:
        raise KafkaSetupError(f"cannot load the CA file {conn.ssl_ca_location} ({getattr(e, 'strerror', None) or e.args[-1]}; PEM only, "
                              f"JKS/PKCS12 stores are not read): check {conn.where('ssl_ca_location')}") from None
    if conn.ssl_certificate_location:
        try:
            ctx.load_cert_chain(conn.ssl_certificate_location, conn.ssl_key_location, _secret(conn.ssl_key_password))
        except (OSError, ssl.SSLError) as e:
            raise KafkaSetupError(f"cannot load the client certificate {conn.ssl_certificate_location} / key {conn.ssl_key_location} "
                                  f"({getattr(e, 'strerror', None) or e.args[-1]}; PEM only; an encrypted key needs its password): check "
                                  f"{conn.where('ssl_certificate_location')}, {conn.where('ssl_key_location')}") from None
    if not conn.ssl_check_hostname:
        ctx.check_hostname = False
    _CONTEXTS[conn] = ctx
    return ctx


class _TokenSource:
    """The configured OAUTHBEARER callable; a ``(token, expiry_ms)`` answer is reused until a minute before expiry."""

    def __init__(self, conn: KafkaConnection) -> None:
        spec = conn.oauth_token_provider or ""
        module, _, attr = spec.partition(":")
        try:
            fn = importlib.import_module(module)
            for part in attr.split("."):
                fn = getattr(fn, part)
        except (ImportError, AttributeError, ValueError) as e:
            raise KafkaSetupError(f"cannot load the token provider {spec!r} ({type(e).__name__}: {e}): check "
                                  f"{conn.where('oauth_token_provider')}") from None
        if not callable(fn):
            raise KafkaSetupError(f"the token provider {spec!r} is not callable: check {conn.where('oauth_token_provider')}")
        self._fn: Callable[[], Any] = fn
        self._cached: tuple[str, float] | None = None

    def token(self) -> str:
        """A current token (calls the provider unless a cached one has more than 60 s left)."""
        if self._cached and self._cached[1] - time.time() > 60:
            return self._cached[0]
        got = self._fn()
        if isinstance(got, tuple):
            self._cached = (str(got[0]), float(got[1]) / 1000)
            return str(got[0])
        return str(got)


def _aiokafka_token_provider(source: _TokenSource) -> Any:
    from aiokafka.abc import AbstractTokenProvider

    class Provider(AbstractTokenProvider):  # type: ignore[misc]
        async def token(self) -> str:
            return await asyncio.to_thread(source.token)

    return Provider()


def _kafka_python_token_provider(source: _TokenSource) -> Any:
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class Provider(AbstractTokenProvider):  # type: ignore[misc]
        def token(self) -> str:
            return source.token()

    return Provider()


def aiokafka_kwargs(conn: KafkaConnection) -> dict[str, Any]:
    """aiokafka's connection settings (producer, consumer, admin): ``bootstrap_servers``,
    ``security_protocol``, ``ssl_context``, ``sasl_*`` (aiokafka ``AIOKafkaClient`` arguments).

    Raises:
        KafkaSetupError: as :func:`ssl_context`, or a token provider that cannot be loaded.
    """
    kw: dict[str, Any] = {"bootstrap_servers": [f"{h}:{p}" if ":" not in h else f"[{h}]:{p}" for h, p in conn.hosts()],
                          "security_protocol": str(conn.security_protocol)}
    if conn.uses_tls:
        kw["ssl_context"] = ssl_context(conn)
    if conn.sasl_mechanism is not None:
        kw["sasl_mechanism"] = str(conn.sasl_mechanism)
        if conn.sasl_mechanism is SaslMechanism.OAUTHBEARER:
            kw["sasl_oauth_token_provider"] = _aiokafka_token_provider(_TokenSource(conn))
        else:
            kw["sasl_plain_username"], kw["sasl_plain_password"] = conn.sasl_username, _secret(conn.sasl_password)
    return kw


def kafka_python_kwargs(conn: KafkaConnection) -> dict[str, Any]:
    """kafka-python 3.x's connection settings (same names as aiokafka's; the same TLS context, so
    both libraries verify the brokers alike; its own token provider class).

    Raises:
        as :func:`aiokafka_kwargs`.
    """
    kw = aiokafka_kwargs(conn)
    if "sasl_oauth_token_provider" in kw:
        kw["sasl_oauth_token_provider"] = _kafka_python_token_provider(_TokenSource(conn))
    return kw


def faust_broker(conn: KafkaConnection) -> list[str]:
    """faust's ``broker`` setting: one ``kafka://host:port`` URL per bootstrap server (faust also
    splits ``kafka://h1:9092,h2:9092`` itself, but a list leaves nothing to its URL parsing)."""
    return [f"kafka://{h}:{p}" if ":" not in h else f"kafka://[{h}]:{p}" for h, p in conn.hosts()]


def faust_credentials(conn: KafkaConnection) -> Any:
    """faust's ``broker_credentials``: ``SASLCredentials`` / ``OAuthCredentials`` (with the TLS context
    for SASL_SSL), ``SSLCredentials`` for SSL, None for PLAINTEXT (faust.auth).

    Raises:
        as :func:`aiokafka_kwargs`.
    """
    from faust.auth import OAuthCredentials, SASLCredentials, SSLCredentials

    ctx = ssl_context(conn)
    if conn.sasl_mechanism is SaslMechanism.OAUTHBEARER:
        return OAuthCredentials(oauth_cb=_aiokafka_token_provider(_TokenSource(conn)), ssl_context=ctx)
    if conn.sasl_mechanism is not None:
        return SASLCredentials(username=conn.sasl_username, password=_secret(conn.sasl_password), ssl_context=ctx,
                               mechanism=str(conn.sasl_mechanism))
    return SSLCredentials(ctx) if ctx is not None else None


def _merge(conn: ConnectionLike, kwargs: dict[str, Any], builder: Callable[[KafkaConnection], dict[str, Any]]) -> dict[str, Any]:
    base = builder(as_connection(conn))
    clash = set(base) & set(kwargs)
    if clash:
        raise TypeError(f"connection settings come from the KafkaConnection, not from arguments: {sorted(clash)}")
    return {**kwargs, **base}


def aiokafka_producer(conn: ConnectionLike, **kwargs: Any) -> Any:
    """An ``aiokafka.AIOKafkaProducer`` on ``conn`` with ``kwargs`` (client id, acks, batching...)."""
    from aiokafka import AIOKafkaProducer

    return AIOKafkaProducer(**_merge(conn, kwargs, aiokafka_kwargs))


def aiokafka_consumer(conn: ConnectionLike, *topics: str, **kwargs: Any) -> Any:
    """An ``aiokafka.AIOKafkaConsumer`` on ``conn`` (subscribed to ``topics`` if any) with ``kwargs``."""
    from aiokafka import AIOKafkaConsumer

    return AIOKafkaConsumer(*topics, **_merge(conn, kwargs, aiokafka_kwargs))


ADMIN_ATTEMPTS = 6
"""Tries of one admin request (1, 2, then 3 s apart: about 12 s in all) when the broker it went to
refuses the connection or the group coordinator is not there yet (a broker of a cluster restarting,
a fresh cluster still creating ``__consumer_offsets``)."""


class _RetryingAdmin:
    """A ``KafkaAdminClient`` whose requests are tried again (up to :data:`ADMIN_ATTEMPTS` times) when
    the node kafka-python picked for them refuses the connection, or the group coordinator is not
    available yet, is loading, or moved (``COORDINATOR_NOT_AVAILABLE`` / ``_LOAD_IN_PROGRESS`` /
    ``NOT_COORDINATOR``, Kafka's retriable error codes 14-16).

    kafka-python 3.x sends an admin request to one node from the metadata (the least loaded one, or
    the controller) and raises ``KafkaConnectionError`` at once when that node is down, although the
    cluster's other brokers answer; the next try goes to another node (the refused one is in its
    reconnect backoff). Any other error, and the last try's, is raised as it is.
    """

    def __init__(self, admin: Any) -> None:
        self._admin = admin

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._admin, name)
        if not callable(attr) or name == "close":
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            from kafka.errors import (
                CoordinatorLoadInProgressError,
                CoordinatorNotAvailableError,
                KafkaConnectionError,
                NodeNotReadyError,
                NotCoordinatorError,
            )

            for attempt in range(ADMIN_ATTEMPTS):
                try:
                    return attr(*args, **kwargs)
                except (KafkaConnectionError, NodeNotReadyError, CoordinatorNotAvailableError, CoordinatorLoadInProgressError,
                        NotCoordinatorError):
                    if attempt == ADMIN_ATTEMPTS - 1:
                        raise
                    time.sleep(min(attempt + 1, 3))
            raise AssertionError("unreachable")

        return call


def kafka_admin(conn: ConnectionLike, **kwargs: Any) -> Any:
    """A kafka-python ``KafkaAdminClient`` on ``conn`` (it bootstraps in its constructor) whose requests
    survive one broker of a cluster being down (:class:`_RetryingAdmin`).

    Raises:
        kafka.errors.KafkaTimeoutError: when no broker answers within ``bootstrap_timeout_ms``.
    """
    from kafka import KafkaAdminClient

    return _RetryingAdmin(KafkaAdminClient(**_merge(conn, kwargs, kafka_python_kwargs)))


def kafka_consumer(conn: ConnectionLike, **kwargs: Any) -> Any:
    """A kafka-python ``KafkaConsumer`` on ``conn`` (no subscription) with ``kwargs``."""
    from kafka import KafkaConsumer

    return KafkaConsumer(**_merge(conn, kwargs, kafka_python_kwargs))


def kafka_producer(conn: ConnectionLike, **kwargs: Any) -> Any:
    """A kafka-python ``KafkaProducer`` on ``conn`` with ``kwargs``."""
    from kafka import KafkaProducer

    return KafkaProducer(**_merge(conn, kwargs, kafka_python_kwargs))


def faust_app(conn: ConnectionLike, app_id: str, **kwargs: Any) -> Any:
    """A ``faust.App`` on ``conn`` (``broker`` and ``broker_credentials`` from it) with ``kwargs``."""
    import faust

    c = as_connection(conn)
    return faust.App(app_id, **_merge(c, kwargs, lambda c: {"broker": faust_broker(c), "broker_credentials": faust_credentials(c)}))
