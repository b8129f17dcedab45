"""A Kafka client properties file (``client.properties``) read as Kafka users already carry one.

The file is parsed as Java's ``java.util.Properties.load`` does (``key=value``, ``key: value`` or
``key value``; ``#`` and ``!`` comments; a trailing backslash continues a line; ``\\t``, ``\\uXXXX``
and other escapes), then its keys are sorted by one rule:

* A key that starts with ``security.``, ``sasl.`` or ``ssl.`` (and librdkafka's
  ``enable.ssl.certificate.verification``) decides how hivestream reaches and authenticates to the
  brokers, so it is **honoured** (:data:`HONOURED`), **ignored** only if it is one of the few that
  cannot weaken the connection (:data:`IGNORED_SECURITY`), or **refused**: every refused key (JKS or
  PKCS12 stores, GSSAPI, callback handler classes, inline stores, an unknown security key) is named
  in one :class:`~streams.kafka.errors.KafkaSetupError`, with what to do instead.
* Every other key is client tuning that hivestream sets per client itself (``acks``,
  ``session.timeout.ms``, ``client.dns.lookup``, ``linger.ms``, the Schema Registry keys
  ``schema.registry.url`` / ``basic.auth.*``...): **ignored**, listed in :attr:`ClientProperties.ignored`.

Java-client keys (``sasl.mechanism``, ``sasl.jaas.config`` with ``PlainLoginModule`` /
``ScramLoginModule`` / ``OAuthBearerLoginModule``, ``ssl.truststore.*`` and ``ssl.keystore.*`` of
type PEM, ``ssl.key.password``) and librdkafka keys (``sasl.mechanisms``, ``sasl.username``,
``sasl.password``, ``ssl.ca.location``, ``ssl.certificate.location``, ``ssl.key.location``) both work,
so a Confluent Cloud, MSK, Aiven or Redpanda sample file is read unchanged. No value of a secret
key ever appears in an error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from streams.kafka.errors import KafkaSetupError

SECURITY_PREFIXES = ("security.", "sasl.", "ssl.")
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")

HONOURED = {
    "bootstrap.servers": "bootstrap_servers",
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.mechanisms": "sasl_mechanism",
    "sasl.username": "sasl_username",
    "sasl.password": "sasl_password",
    "ssl.truststore.location": "ssl_ca_location",
    "ssl.ca.location": "ssl_ca_location",
    "ssl.keystore.location": "ssl_certificate_location",
    "ssl.certificate.location": "ssl_certificate_location",
    "ssl.key.location": "ssl_key_location",
    "ssl.key.password": "ssl_key_password",
}
"""File key → :class:`~streams.kafka.connection.KafkaConnection` field (plus ``sasl.jaas.config``,
``ssl.truststore.type``, ``ssl.keystore.type`` and ``ssl.endpoint.identification.algorithm``, read apart)."""

IGNORED_SECURITY = ("ssl.protocol", "ssl.enabled.protocols", "ssl.truststore.password", "ssl.keystore.password", "sasl.login.refresh.")
"""Security keys that cannot weaken the connection and are ignored: Python negotiates TLS 1.2 or
newer by itself, PEM stores need no store password, token refresh timing is the provider's."""

_SECRET_KEYS = {"sasl.jaas.config", "sasl.password", "ssl.key.password", "ssl.keystore.password", "ssl.truststore.password", "ssl.keystore.key"}

_LOGIN_MODULES = {
    "org.apache.kafka.common.security.plain.PlainLoginModule": ("PLAIN",),
    "org.apache.kafka.common.security.scram.ScramLoginModule": ("SCRAM-SHA-256", "SCRAM-SHA-512"),
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule": ("OAUTHBEARER",),
}

_MSK_IAM_HINT = "for MSK IAM use sasl.mechanism=OAUTHBEARER and a token provider, HIVESTREAM_KAFKA_OAUTH_TOKEN_PROVIDER (docs/cluster.md)"


@dataclass(frozen=True)
class ClientProperties:
    """The connection settings a properties file gives.

    Attributes:
        values: :class:`~streams.kafka.connection.KafkaConnection` field → value (strings).
        origins: field → the file key it came from.
        ignored: the keys ignored as client tuning or harmless security keys, in file order.
    """

    values: dict[str, str] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)
    ignored: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return f"ClientProperties(fields={sorted(self.values)}, ignored={list(self.ignored)})"  # values hold secrets


def parse_properties(text: str) -> dict[str, str]:
    """The key/value pairs of a Java properties text, later keys winning (``Properties.load``).

    Source: the grammar of ``java.util.Properties.load(Reader)``.
    """
    out: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(" \t\f")
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip(" \t\f")
            i += 1
        if _continues(line):
            line = line[:-1]
        key, value = _split(line)
        out[_unescape(key)] = _unescape(value)
    return out


def _continues(line: str) -> bool:
    n = len(line) - len(line.rstrip("\\"))
    return n % 2 == 1


def _split(line: str) -> tuple[str, str]:
    j, n = 0, len(line)
    while j < n:
        c = line[j]
        if c == "\\":
            j += 2
            continue
        if c in "=: \t\f":
            break
        j += 1
    key, rest = line[:j], line[j:]
    k = len(rest) - len(rest.lstrip(" \t\f"))
    if rest[k:k + 1] in ("=", ":"):
        k += 1
    return key, rest[k:].lstrip(" \t\f")


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    out: list[str] = []
    j = 0
    while j < len(s):
        c = s[j]
        if c == "\\" and j + 1 < len(s):
            nxt = s[j + 1]
            if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", s[j + 2:j + 6]):
                out.append(chr(int(s[j + 2:j + 6], 16)))
                j += 6
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            j += 2
            continue
        out.append(c)
        j += 1
    return "".join(out)


@dataclass(frozen=True)
class JaasConfig:
    """One ``sasl.jaas.config`` entry: the login module and its options (values may be secrets)."""

    module: str
    options: dict[str, str]

    def __repr__(self) -> str:
        return f"JaasConfig(module={self.module!r}, options={sorted(self.options)})"


_JAAS_TOKEN = re.compile(r"""\s*(?:(?P<semi>;)
    |(?P<name>[A-Za-z0-9_.$-]+)\s*=\s*(?:"(?P<dq>(?:[^"\\]|\\.)*)"|'(?P<sq>(?:[^'\\]|\\.)*)'|(?P<bare>[^\s;"']+))
    |(?P<word>[A-Za-z0-9_.$-]+))""", re.VERBOSE)


def parse_jaas(text: str) -> JaasConfig:
    """The single login module of a ``sasl.jaas.config`` value: ``<module> <flag> [name=value ...];``.

    Raises:
        ValueError: on anything else; the message never repeats the text (it holds the password).
    """
    words: list[str] = []
    options: dict[str, str] = {}
    pos, ended = 0, False
    while pos < len(text):
        if not text[pos:].strip():
            break
        m = _JAAS_TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise ValueError("unreadable text after the login module's options")
        pos = m.end()
        if ended:
            raise ValueError("more than one login module (hivestream reads exactly one)")
        if m["semi"]:
            ended = True
        elif m["name"]:
            raw = m["dq"] if m["dq"] is not None else m["sq"] if m["sq"] is not None else m["bare"]
            options[m["name"]] = re.sub(r"\\(.)", r"\1", raw)
        else:
            if options:
                raise ValueError("a bare word among the login module's options")
            words.append(m["word"])
    if not ended:
        raise ValueError("it does not end with ';'")
    if len(words) != 2 or words[1].lower() not in ("required", "requisite", "sufficient", "optional"):
        raise ValueError("expected '<LoginModule class> required name=\"value\" ...;'")
    return JaasConfig(words[0], options)


def read_client_properties(text: str, source: str) -> ClientProperties:
    """The connection settings of the properties ``text`` of the file named ``source``.

    Raises:
        KafkaSetupError: naming every key the file sets that hivestream cannot honour (values of
            secret keys are never shown).
    """
    props = parse_properties(text)
    values: dict[str, str] = {}
    origins: dict[str, str] = {}
    ignored: list[str] = []
    refused: list[str] = []
    hints: list[str] = []

    def put(fld: str, value: str, key: str) -> None:
        if fld in values and values[fld] != value:
            shown = "" if key in _SECRET_KEYS or fld == "sasl_password" else f" ({origins[fld]}={values[fld]}, {key}={value})"
            refused.append(f"{origins[fld]} and {key} disagree{shown}: set one")
            return
        values[fld], origins[fld] = value, key

    stores = {"ssl.truststore.type": props.get("ssl.truststore.type", ""), "ssl.keystore.type": props.get("ssl.keystore.type", "")}
    for key, value in props.items():
        if key in ("ssl.truststore.type", "ssl.keystore.type"):
            if value.strip().upper() != "PEM":
                what = "truststore.location" if key == "ssl.truststore.type" else "keystore.location"
                refused.append(f"{key}={value} (hivestream reads PEM files only: convert the store to PEM, e.g. "
                               f"`keytool -exportcert -rfc` / `openssl pkcs12 -nodes`, and set ssl.{what} to it; "
                               "managed clusters with public CAs need no truststore)")
        elif key in HONOURED:
            fld = HONOURED[key]
            value = value.strip()
            if key == "ssl.ca.location" and value == "probe":  # librdkafka: the system's CA paths
                continue
            if fld == "security_protocol" and value.upper() not in PROTOCOLS:
                refused.append(f"{key}={value} (one of {', '.join(PROTOCOLS)})")
                continue
            if fld == "sasl_mechanism" and value.upper() not in MECHANISMS:
                if value.upper() == "AWS_MSK_IAM":
                    hints.append(_MSK_IAM_HINT)
                refused.append(f"{key}={value} (hivestream supports {', '.join(MECHANISMS)}; not GSSAPI/Kerberos)")
                continue
            if key == "ssl.keystore.location" and not stores["ssl.keystore.type"]:
                refused.append("ssl.keystore.location without ssl.keystore.type=PEM (a JKS or PKCS12 store cannot be read; "
                               "a PEM file with the certificate and its key can)")
                continue
            put(fld, value.upper() if fld in ("security_protocol", "sasl_mechanism") else value, key)
        elif key == "sasl.jaas.config":
            try:
                jaas = parse_jaas(value)
            except ValueError as e:
                refused.append(f"sasl.jaas.config cannot be read: {e}")
                continue
            if jaas.module not in _LOGIN_MODULES:
                if "msk" in jaas.module.lower():
                    hints.append(_MSK_IAM_HINT)
                refused.append(f"sasl.jaas.config uses {jaas.module} (hivestream reads PlainLoginModule, ScramLoginModule and "
                               "OAuthBearerLoginModule)")
                continue
            extra = sorted(set(jaas.options) - ({"username", "password"} if "OAuth" not in jaas.module else set()))
            if extra:
                refused.append(f"sasl.jaas.config option(s) {', '.join(extra)} of {jaas.module.rsplit('.', 1)[-1]} (not supported)")
                continue
            for opt in ("username", "password"):
                if opt in jaas.options:
                    put(f"sasl_{opt}", jaas.options[opt], "sasl.jaas.config")
            values["_jaas_module"] = jaas.module
        elif key == "ssl.endpoint.identification.algorithm":
            v = value.strip().lower()
            if v not in ("", "none", "https"):
                refused.append(f"{key}={value} (https, or empty to skip the host name check)")
            else:
                values["ssl_check_hostname"], origins["ssl_check_hostname"] = ("true" if v == "https" else "false"), key
        elif key.startswith(IGNORED_SECURITY):
            ignored.append(key)
        elif key.startswith(SECURITY_PREFIXES) or key == "enable.ssl.certificate.verification":
            refused.append(key + _refusal_hint(key))
            if "callback.handler" in key:
                hints.append(_MSK_IAM_HINT)
        else:
            ignored.append(key)
    module = values.pop("_jaas_module", None)
    mech = values.get("sasl_mechanism")
    if module and mech and mech not in _LOGIN_MODULES[module]:
        refused.append(f"sasl.jaas.config uses {module.rsplit('.', 1)[-1]} but {origins['sasl_mechanism']} is {mech}")
    if module and not mech:
        values["sasl_mechanism"], origins["sasl_mechanism"] = _LOGIN_MODULES[module][0], "sasl.jaas.config"
    if refused:
        raise KafkaSetupError(f"{source}: hivestream cannot honour {'this key' if len(refused) == 1 else f'{len(refused)} keys'}: "
                              + "; ".join(refused) + "".join(f". {h[0].upper()}{h[1:]}" for h in dict.fromkeys(hints)))
    return ClientProperties(values, origins, tuple(ignored))


def _refusal_hint(key: str) -> str:
    if "callback.handler" in key:
        return " (a Java callback class)"
    if "kerberos" in key:
        return " (GSSAPI / Kerberos is not supported)"
    if key in ("ssl.truststore.certificates", "ssl.keystore.certificate.chain", "ssl.keystore.key"):
        return " (inline PEM: put it in a file and set ssl.truststore.location / ssl.keystore.location)"
    if key == "enable.ssl.certificate.verification":
        return " (hivestream always verifies the brokers' certificates; give it the CA with ssl.ca.location)"
    return " (an unknown security setting)"
