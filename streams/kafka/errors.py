"""Kafka connection and configuration failures as one line: the cause and the setting to look at.

Both client libraries bury the cause of a failed connection: kafka-python 3.x raises
``KafkaTimeoutError('Unable to bootstrap from ...')`` after its bootstrap timeout, aiokafka
``KafkaConnectionError('Unable to bootstrap from ...')``, whatever happened (refused, wrong
password, TLS verification, a mechanism the broker does not enable). The preflight
(:mod:`streams.kafka.preflight`) connects itself and hands the real exception to :func:`explain`,
which maps it (by type, and by class name for the errors both libraries define under slightly
different names) to one line. :func:`explain` never puts a secret in the line: it does not repeat
a request or a value, and every line passes :func:`scrub`, which replaces each secret this
process was given (:func:`remember_secret`) by ``***``.
"""

from __future__ import annotations

import asyncio
import logging
import re
import socket
import ssl
from typing import Protocol

_SECRETS: set[str] = set()


class KafkaSetupError(Exception):
    """A Kafka setting or connection problem: ``str(e)`` is one line naming the cause and the
    setting to look at, and never holds a secret. Commands print it and exit 2."""


class ConnectionFacts(Protocol):
    """What :func:`explain` needs to know about the connection (a
    :class:`streams.kafka.connection.KafkaConnection` has it)."""

    @property
    def bootstrap_servers(self) -> str:
        """Comma-separated ``host:port`` list."""
        ...

    @property
    def sasl_username(self) -> str | None:
        """The SASL user, if any (not a secret)."""
        ...

    def mechanism_name(self) -> str:
        """The SASL mechanism's name, or ``"none"``."""
        ...

    def where(self, field: str) -> str:
        """Where the value of ``field`` came from (an option, a variable, a key of a file), or how to set it."""
        ...


def remember_secret(value: str) -> None:
    """Register a secret (a password, a key password) so :func:`scrub` hides it from every line and log record."""
    if value:
        _SECRETS.add(value)


def scrub(text: str) -> str:
    """``text`` with every remembered secret replaced by ``***`` (longest first)."""
    for secret in sorted(_SECRETS, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, "***")
    return text


class ScrubSecrets(logging.Filter):
    """A logging filter (put it on handlers) that removes remembered secrets from a record's
    message and its formatted exception, whatever library logged it."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite ``record`` in place when it holds a secret; always keeps the record."""
        if not _SECRETS:
            return True
        msg = record.getMessage()
        clean = scrub(msg)
        if clean != msg:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = scrub(logging.Formatter().formatException(record.exc_info))
        elif record.exc_text:
            record.exc_text = scrub(record.exc_text)
        return True


def scrub_logging(logger: logging.Logger | None = None) -> None:
    """Put :class:`ScrubSecrets` on every handler of ``logger`` (default: the root logger)."""
    for handler in (logger or logging.getLogger()).handlers:
        if not any(isinstance(f, ScrubSecrets) for f in handler.filters):
            handler.addFilter(ScrubSecrets())


def _names(exc: BaseException) -> set[str]:
    return {k.__name__ for k in type(exc).__mro__}


def _is(exc: BaseException, *fragments: str) -> bool:
    return any(f in n for n in _names(exc) for f in fragments)


def explain(exc: BaseException, conn: ConnectionFacts | None = None, *, at: str | None = None, timeout_s: float | None = None) -> str:
    """One line for ``exc``: what went wrong and which setting to look at (no traceback, no secret).

    Args:
        exc: what a Kafka client, the preflight or the TLS layer raised.
        conn: the connection it was made with (for the settings' origins); None names the settings generically.
        at: the ``host:port`` the failure happened at, if known.
        timeout_s: the bound of the attempt, for timeouts.

    Returns:
        The line (``KafkaSetupError`` messages as they are).

    Source: the error classes of kafka-python 3.x (``kafka.errors``), aiokafka 0.14
    (``aiokafka.errors``) and Python's ``ssl`` / ``socket``.
    """
    where = conn.where if conn is not None else _generic_where
    servers = at or (conn.bootstrap_servers if conn is not None else "the bootstrap servers")
    if isinstance(exc, KafkaSetupError):
        return scrub(str(exc))
    if _is(exc, "AuthorizationFailed", "AuthorizationError"):
        user = f" for user {conn.sasl_username!r}" if conn is not None and conn.sasl_username else ""
        what = _kind(exc)
        return (f"not authorised: the cluster refused {what}{user} ({type(exc).__name__}); its ACLs must allow hivestream's "
                "topics and groups (docs/cluster.md)")
    if _is(exc, "SaslAuthenticationFailed", "AuthenticationFailed"):
        user = f"user {conn.sasl_username!r}" if conn is not None and conn.sasl_username else "the client"
        mech = conn.mechanism_name() if conn is not None else "SASL"
        return (f"authentication failed at {servers}: the broker rejected {user} with {mech} (wrong username or password?); "
                f"check {_and(where('sasl_username'), where('sasl_password'))}")
    if _is(exc, "UnsupportedSaslMechanism"):
        mech = conn.mechanism_name() if conn is not None else "this mechanism"
        return f"the broker at {servers} does not enable SASL mechanism {mech}: check {where('sasl_mechanism')} (the broker's sasl.enabled.mechanisms)"
    if isinstance(exc, ssl.SSLCertVerificationError):
        reason = exc.verify_message or "verification failed"
        if "hostname" in reason.lower() or "ip address mismatch" in reason.lower():
            return (f"TLS: the certificate of {servers} does not name that host ({reason}): connect by a name the certificate holds, "
                    f"or set ssl.endpoint.identification.algorithm= (empty) in {where('kafka_config')}")
        return f"TLS: the certificate of {servers} was not verified ({reason}): check the CA, {where('ssl_ca_location')}"
    if isinstance(exc, ssl.SSLError):
        reason = exc.reason or type(exc).__name__
        return (f"TLS handshake with {servers} failed ({reason}): is this a TLS listener, and is a client certificate needed? "
                f"check {where('security_protocol')}, {where('ssl_certificate_location')}")
    if isinstance(exc, ConnectionRefusedError):
        return f"no Kafka broker at {servers} (connection refused): is it running? check {where('bootstrap_servers')}"
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve {servers} ({exc.strerror or exc}): check {where('bootstrap_servers')}"
    if isinstance(exc, TimeoutError | asyncio.TimeoutError) or _is(exc, "KafkaTimeoutError", "RequestTimedOut"):
        bound = f" within {timeout_s:g} s" if timeout_s else ""
        text = str(exc)
        if "bootstrap" in text.lower() or isinstance(exc, TimeoutError | asyncio.TimeoutError):
            return (f"no answer from a Kafka broker at {servers}{bound}: check {where('bootstrap_servers')} "
                    f"(and a firewall, or {where('security_protocol')})")
        return scrub(f"Kafka: timed out{bound}: {type(exc).__name__}: {text}")[:400]
    text = str(exc)
    if isinstance(exc, ConnectionResetError | ConnectionAbortedError | BrokenPipeError) or ("closed" in text.lower() and _is(exc, "ConnectionError")):
        return (f"the broker at {servers} closed the connection during the handshake: the listener expects another security "
                f"protocol or a client certificate; check {where('security_protocol')}")
    if isinstance(exc, OSError) and not _is(exc, "KafkaError"):
        return f"cannot connect to {servers} ({exc.strerror or type(exc).__name__}): check {where('bootstrap_servers')}"
    if "unable to bootstrap" in text.lower():
        return (f"could not connect to any Kafka broker of {servers}: check {where('bootstrap_servers')} "
                f"and {where('security_protocol')}")
    if _is(exc, "KafkaConnectionError") and ("ECONNREFUSED" in text or "111" in text or "refused" in text.lower()):
        return (f"a broker of the cluster behind {servers} refused the connection (it is down or restarting): nothing was "
                f"written; start it again (or wait for the cluster to elect new leaders) and retry; check {where('bootstrap_servers')}")
    if _is(exc, "IllegalSaslState"):
        return (f"the broker at {servers} does not expect SASL on this listener: it is probably PLAINTEXT or SSL; "
                f"check {where('security_protocol')}")
    if _is(exc, "InvalidReplicationFactor"):
        return (f"the cluster refused the replication factor{_broker_reason(text)}: it has fewer brokers than replicas asked for; "
                "check --replication-factor / HIVESTREAM_REPLICATION_FACTOR (unset: the broker's default.replication.factor)")
    if _is(exc, "PolicyViolation", "InvalidConfiguration", "InvalidPartitions"):
        return (f"the cluster refused a topic's settings ({type(exc).__name__}{_broker_reason(text, ': ')}): check "
                "--replication-factor, HIVESTREAM_MIN_INSYNC_REPLICAS and --partitions against the cluster's rules")
    if _is(exc, "NotEnoughReplicas"):
        return ("not enough in-sync replicas: fewer brokers are up than the topic's min.insync.replicas "
                "(HIVESTREAM_MIN_INSYNC_REPLICAS); the write was not acknowledged")
    if _is(exc, "KafkaError") or type(exc).__module__.split(".")[0] in {"kafka", "aiokafka"}:
        if "failed with response" in text:  # kafka-python repeats the whole request: keep the broker's own message only
            return scrub(f"Kafka: {type(exc).__name__}{_broker_reason(text, ': ')}")[:400]
        return scrub(f"Kafka: {type(exc).__name__}: {text}".splitlines()[0])[:400]
    return scrub(f"{type(exc).__name__}: {text}".splitlines()[0])[:400]


def _broker_reason(text: str, lead: str = " (") -> str:
    """The broker's ``error_message`` inside a kafka-python error text, as `` (message)`` (or ``lead`` + message), else ``""``."""
    m = re.search(r"error_message='((?:[^'\\]|\\.)*)'", text)
    if not m or not m.group(1) or m.group(1) == "None":
        return ""
    return f"{lead}{m.group(1)}{')' if lead == ' (' else ''}"


def _kind(exc: BaseException) -> str:
    names = _names(exc)
    if any("Topic" in n for n in names):
        return "access to a topic"
    if any("Group" in n for n in names):
        return "access to a consumer group"
    if any("Cluster" in n for n in names):
        return "a cluster operation (creating topics, describing configs or idempotent writes)"
    if any("Transactional" in n for n in names):
        return "a transactional id"
    return "the request"


def _generic_where(field: str) -> str:
    return {
        "bootstrap_servers": "--bootstrap / KAFKA_BOOTSTRAP_SERVERS / bootstrap.servers",
        "security_protocol": "HIVESTREAM_KAFKA_SECURITY_PROTOCOL / security.protocol",
        "sasl_mechanism": "HIVESTREAM_KAFKA_SASL_MECHANISM / sasl.mechanism",
        "sasl_username": "HIVESTREAM_KAFKA_SASL_USERNAME / sasl.jaas.config",
        "sasl_password": "HIVESTREAM_KAFKA_SASL_PASSWORD / sasl.jaas.config",
        "ssl_ca_location": "HIVESTREAM_KAFKA_SSL_CA_LOCATION / ssl.truststore.location",
        "ssl_certificate_location": "HIVESTREAM_KAFKA_SSL_CERTIFICATE_LOCATION / ssl.keystore.location",
        "kafka_config": "the client properties file (--kafka-config / HIVESTREAM_KAFKA_CONFIG)",
    }.get(field, field)


def _and(a: str, b: str) -> str:
    """``"a and b"``, or ``a`` alone when both name the same setting (both in one ``sasl.jaas.config`` line)."""
    return a if a == b else f"{a} and {b}"
