"""The connection settings of every Kafka client hivestream makes, and the only place they are made.

:class:`KafkaConnection` (frozen) holds where the brokers are and how to authenticate to them.
:func:`resolve_connection` builds it from, in this precedence: **options** (``--bootstrap``,
keyword overrides) > **environment** (``KAFKA_BOOTSTRAP_SERVERS``, ``HIVESTREAM_KAFKA_*``, :data:`ENV`)
> **client properties file** (``--kafka-config FILE`` or ``HIVESTREAM_KAFKA_CONFIG``,
:mod:`streams.kafka.client_properties`) > defaults (``127.0.0.1:19092``, PLAINTEXT).

Supported: ``PLAINTEXT``, ``SSL`` (the brokers' certificates verified against a CA, the system's
by default; mutual TLS with a client certificate and key), ``SASL_PLAINTEXT``, ``SASL_SSL``; SASL
``PLAIN``, ``SCRAM-SHA-256``, ``SCRAM-SHA-512`` and ``OAUTHBEARER`` through a token provider
``module:callable`` (``HIVESTREAM_KAFKA_OAUTH_TOKEN_PROVIDER``: a callable without arguments that
returns a token, or ``(token, expiry_ms)`` as ``aws_msk_iam_sasl_signer``'s
``MSKAuthTokenProvider.generate_auth_token(region)`` does; such a token is reused until a minute
before it expires).

:mod:`streams.kafka.clients` turns one connection into each library's settings and makes every
Kafka client hivestream uses. Passwords are pydantic ``SecretStr`` (never in a repr, a dump or a
message) and are remembered for :func:`streams.kafka.errors.scrub`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, SecretStr

from streams.kafka.client_properties import read_client_properties
from streams.kafka.errors import KafkaSetupError, remember_secret

DEFAULT_BOOTSTRAP = "127.0.0.1:19092"


class SecurityProtocol(StrEnum):
    """Kafka ``security.protocol``."""

    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"


class SaslMechanism(StrEnum):
    """Kafka ``sasl.mechanism`` values hivestream supports."""

    PLAIN = "PLAIN"
    SCRAM_SHA_256 = "SCRAM-SHA-256"
    SCRAM_SHA_512 = "SCRAM-SHA-512"
    OAUTHBEARER = "OAUTHBEARER"


ENV: dict[str, tuple[str, ...]] = {
    "bootstrap_servers": ("KAFKA_BOOTSTRAP_SERVERS", "HIVESTREAM_KAFKA_BOOTSTRAP_SERVERS"),
    "security_protocol": ("HIVESTREAM_KAFKA_SECURITY_PROTOCOL",),
    "sasl_mechanism": ("HIVESTREAM_KAFKA_SASL_MECHANISM",),
    "sasl_username": ("HIVESTREAM_KAFKA_SASL_USERNAME",),
    "sasl_password": ("HIVESTREAM_KAFKA_SASL_PASSWORD",),
    "ssl_ca_location": ("HIVESTREAM_KAFKA_SSL_CA_LOCATION",),
    "ssl_certificate_location": ("HIVESTREAM_KAFKA_SSL_CERTIFICATE_LOCATION",),
    "ssl_key_location": ("HIVESTREAM_KAFKA_SSL_KEY_LOCATION",),
    "ssl_key_password": ("HIVESTREAM_KAFKA_SSL_KEY_PASSWORD",),
    "oauth_token_provider": ("HIVESTREAM_KAFKA_OAUTH_TOKEN_PROVIDER",),
}
"""Connection field → the environment variables read for it (the first one set wins)."""

CONFIG_ENV = "HIVESTREAM_KAFKA_CONFIG"
_SECRET_FIELDS = ("sasl_password", "ssl_key_password")


class KafkaConnection(BaseModel):
    """Where the brokers are and how to authenticate to them (immutable; secrets never print).

    Attributes:
        bootstrap_servers: comma-separated ``host:port`` list (``bootstrap.servers``).
        security_protocol: ``security.protocol``.
        sasl_mechanism: ``sasl.mechanism`` (SASL protocols only).
        sasl_username, sasl_password: PLAIN and SCRAM credentials.
        ssl_ca_location: PEM file of the CA(s) that signed the brokers' certificates (None: the system's CAs).
        ssl_certificate_location: PEM client certificate (mutual TLS); it may hold the key too.
        ssl_key_location: PEM private key of the client certificate.
        ssl_key_password: password of an encrypted private key.
        ssl_check_hostname: verify that a broker's certificate names the host connected to.
        oauth_token_provider: ``module:callable`` giving OAUTHBEARER tokens.
        config_file: the properties file read, if any.
        origins: (field, where its value came from) pairs, for error messages.
    """

    model_config = ConfigDict(frozen=True)

    bootstrap_servers: str = DEFAULT_BOOTSTRAP
    security_protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    sasl_mechanism: SaslMechanism | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_ca_location: str | None = None
    ssl_certificate_location: str | None = None
    ssl_key_location: str | None = None
    ssl_key_password: SecretStr | None = None
    ssl_check_hostname: bool = True
    oauth_token_provider: str | None = None
    config_file: str | None = None
    origins: tuple[tuple[str, str], ...] = ()

    @classmethod
    def plain(cls, bootstrap: str) -> KafkaConnection:
        """A PLAINTEXT connection to ``bootstrap`` (tests, benchmarks, a local broker)."""
        return cls(bootstrap_servers=bootstrap)

    @property
    def uses_tls(self) -> bool:
        """Whether connections are wrapped in TLS (SSL, SASL_SSL)."""
        return self.security_protocol in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        """Whether connections authenticate with SASL."""
        return self.security_protocol in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)

    def mechanism_name(self) -> str:
        """The SASL mechanism's name, or ``"none"``."""
        return str(self.sasl_mechanism) if self.sasl_mechanism else "none"

    def where(self, field: str) -> str:
        """Where ``field``'s value came from, or the settings that set it (for error lines)."""
        got = dict(self.origins).get(field)
        if got:
            return got
        if field == "kafka_config":
            return f"the client properties file {self.config_file}" if self.config_file else "--kafka-config / HIVESTREAM_KAFKA_CONFIG"
        names = " / ".join(ENV.get(field, ()))
        return ("--bootstrap / " + names if field == "bootstrap_servers" else names) or field

    def hosts(self) -> list[tuple[str, int]]:
        """The bootstrap servers as (host, port); port 9092 when none is given (``[v6]:port`` for IPv6).

        Raises:
            KafkaSetupError: on an empty list or a port that is not a number.
        """
        out: list[tuple[str, int]] = []
        for item in (s.strip() for s in self.bootstrap_servers.split(",")):
            if not item:
                continue
            item = item.split("://", 1)[-1]
            if "@" in item:  # user:password@host would print the password in every error about the address
                raise KafkaSetupError(f"a bootstrap server holds '@' (user info is not part of a Kafka address; credentials go in "
                                      f"sasl.jaas.config or HIVESTREAM_KAFKA_SASL_*): check {self.where('bootstrap_servers')}")
            host, sep, port = item.rpartition(":") if not item.endswith("]") else (item, "", "")
            if not sep:
                host, port = item, "9092"
            if not port.isdigit() or not host or not 0 < int(port) < 65536:
                raise KafkaSetupError(f"bootstrap server {shown(item, 200)} is not host:port (port 1-65535): check "
                                      f"{self.where('bootstrap_servers')}")
            out.append((host.strip("[]"), int(port)))
        if not out:
            raise KafkaSetupError(f"no bootstrap servers: set {self.where('bootstrap_servers')}")
        return out

    def describe(self) -> str:
        """A one-line summary without secrets, e.g. ``SASL_SSL SCRAM-SHA-512 as 'alice' to h1:9096``."""
        user = f" as {self.sasl_username!r}" if self.sasl_username else ""
        mech = f" {self.sasl_mechanism}" if self.sasl_mechanism else ""
        return f"{self.security_protocol}{mech}{user} to {self.bootstrap_servers}"


ConnectionLike = KafkaConnection | str
"""A connection, or a bare bootstrap list meaning PLAINTEXT (tests and benchmarks)."""


def as_connection(conn: ConnectionLike) -> KafkaConnection:
    """``conn`` itself, or a PLAINTEXT connection to the bootstrap list ``conn``."""
    return conn if isinstance(conn, KafkaConnection) else KafkaConnection.plain(conn)


def resolve_connection(
    *,
    bootstrap: str | None = None,
    config_file: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
    **overrides: str | None,
) -> KafkaConnection:
    """The connection from options > environment > properties file > defaults.

    Args:
        bootstrap: ``--bootstrap`` (None: not given).
        config_file: ``--kafka-config`` (None: ``HIVESTREAM_KAFKA_CONFIG``, else no file).
        environ: the environment (default ``os.environ``); empty values count as unset.
        overrides: other fields given as options (``security_protocol="SSL"``...; None: not given).

    Raises:
        KafkaSetupError: an unreadable file, a key it cannot honour, an unknown protocol or
            mechanism, or settings that do not fit together (one line, no secret).
    """
    env = os.environ if environ is None else environ
    values: dict[str, str] = {}
    origins: dict[str, str] = {}
    path = str(config_file) if config_file else env.get(CONFIG_ENV) or None
    if path:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            how = "--kafka-config" if config_file else CONFIG_ENV
            raise KafkaSetupError(f"cannot read the Kafka client properties file {path} ({getattr(e, 'strerror', None) or e}): check {how}") from None
        props = read_client_properties(text, path)
        values.update(props.values)
        origins.update({k: f"{v} in {path}" for k, v in props.origins.items()})
    for fld, names in ENV.items():
        for name in names:
            if env.get(name):
                values[fld], origins[fld] = env[name], name
                break
    if bootstrap:
        values["bootstrap_servers"], origins["bootstrap_servers"] = bootstrap, "--bootstrap"
    for fld, value in overrides.items():
        if fld not in KafkaConnection.model_fields:
            raise TypeError(f"unknown connection setting {fld}")
        if value is not None:
            values[fld], origins[fld] = value, f"the {fld} option"
    fields: dict[str, Any] = {"config_file": path, "origins": tuple(sorted(origins.items()))}
    for fld, value in values.items():
        fields[fld] = _typed(fld, value.strip() if fld not in _SECRET_FIELDS else value, origins[fld])
    conn = KafkaConnection(**fields)
    _check(conn)
    for fld in _SECRET_FIELDS:
        secret = getattr(conn, fld)
        if secret is not None:
            remember_secret(secret.get_secret_value())
    return conn


def shown(value: str, longest: int = 40) -> str:
    """``value`` quoted for an error line when it looks like a name or an address; otherwise a
    placeholder, so a secret typed into the wrong setting is not printed back.

    Returns:
        ``'VALUE'`` for up to ``longest`` letters, digits and ``._-:[]``, else ``(a value not shown)``.
    """
    return repr(value) if re.fullmatch(rf"[A-Za-z0-9._:\[\]-]{{1,{longest}}}", value) else "(a value not shown)"


def _mechanism_shown(value: str) -> str:
    """A mechanism's name when it is one Kafka knows (GSSAPI, AWS_MSK_IAM, ...), else a placeholder."""
    known = {"GSSAPI", "AWS_MSK_IAM", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"}
    return repr(value) if value.upper() in known else "(a value not shown)"


def _typed(fld: str, value: str, origin: str) -> Any:
    if fld == "security_protocol":
        try:
            return SecurityProtocol(value.upper())
        except ValueError:
            raise KafkaSetupError(f"unknown security protocol (the value of {origin} is not shown: it could be a secret in the "
                                  f"wrong place): one of {', '.join(SecurityProtocol)}") from None
    if fld == "sasl_mechanism":
        try:
            return SaslMechanism(value.upper())
        except ValueError:
            raise KafkaSetupError(f"unsupported SASL mechanism {_mechanism_shown(value)} (from {origin}): hivestream supports "
                                  f"{', '.join(SaslMechanism)}") from None
    if fld in _SECRET_FIELDS:
        return SecretStr(value)
    if fld == "ssl_check_hostname":
        return value.lower() in ("1", "true", "yes")
    return value or None


def _check(c: KafkaConnection) -> None:
    """Raise :class:`KafkaSetupError` when the settings of ``c`` do not fit together."""
    c.hosts()
    origin = dict(c.origins).get("security_protocol")
    proto = (f"security protocol {c.security_protocol} (from {origin})" if origin else
             f"security protocol {c.security_protocol} (the default: set security.protocol or {c.where('security_protocol')})")
    if c.uses_sasl and c.sasl_mechanism is None:
        raise KafkaSetupError(f"{proto} needs a SASL mechanism: set {c.where('sasl_mechanism')} or sasl.mechanism")
    if not c.uses_sasl and (c.sasl_mechanism or c.sasl_username or c.sasl_password):
        raise KafkaSetupError(f"SASL settings are given but the {proto} does not use SASL: set it to SASL_SSL or SASL_PLAINTEXT")
    if not c.uses_tls and (c.ssl_ca_location or c.ssl_certificate_location or c.ssl_key_location):
        raise KafkaSetupError(f"TLS files are given but the {proto} does not use TLS: set it to SSL or SASL_SSL")
    if c.ssl_key_location and not c.ssl_certificate_location:
        raise KafkaSetupError(f"a client key ({c.where('ssl_key_location')}) without its certificate: set {c.where('ssl_certificate_location')}")
    if c.sasl_mechanism is SaslMechanism.OAUTHBEARER:
        if not c.oauth_token_provider:
            raise KafkaSetupError(f"SASL OAUTHBEARER needs a token provider: set {c.where('oauth_token_provider')} to module:callable")
    elif c.sasl_mechanism is not None and not (c.sasl_username and c.sasl_password):
        raise KafkaSetupError(f"SASL {c.sasl_mechanism} needs a username and a password: set {c.where('sasl_username')} and "
                              f"{c.where('sasl_password')} (or sasl.jaas.config in the properties file)")
    if c.oauth_token_provider and ":" not in c.oauth_token_provider:
        raise KafkaSetupError(f"the token provider {c.oauth_token_provider!r} is not module:callable ({c.where('oauth_token_provider')})")
