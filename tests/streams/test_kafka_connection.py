"""The one Kafka connection: precedence, the client properties file, the builders, the
one-line errors, secrets that never print, and no client made outside streams/kafka/clients.py."""

from __future__ import annotations

import ast
import logging
import os
import socket
import ssl
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main

from streams.kafka.client_properties import parse_jaas, parse_properties, read_client_properties
from streams.kafka.clients import aiokafka_kwargs, faust_broker, faust_credentials, kafka_python_kwargs
from streams.kafka.connection import KafkaConnection, SaslMechanism, SecurityProtocol, resolve_connection
from streams.kafka.errors import KafkaSetupError, ScrubSecrets, explain, scrub
from streams.kafka.topic_check import TopicState, differences, message_limit, output_problems, state_mismatch
from streams.kafka.topics import TopicSpec, creation_request

REPO_ROOT = Path(__file__).resolve().parents[2]
SECRET = "Pa55-w0rd-never-printed"

CONFLUENT_CLOUD = f"""# Required connection configs for Kafka producer, consumer, and admin
bootstrap.servers=pkc-abc12.us-west-2.aws.confluent.cloud:9092
security.protocol=SASL_SSL
sasl.mechanisms=PLAIN
sasl.username=ABCDEFGHIJ
sasl.password={SECRET}
# Best practice for higher availability in librdkafka clients prior to 1.7
session.timeout.ms=45000
client.dns.lookup=use_all_dns_ips
acks=all
# Required connection configs for Confluent Cloud Schema Registry
schema.registry.url=https://psrc-xyz.us-east-2.aws.confluent.cloud
basic.auth.credentials.source=USER_INFO
basic.auth.user.info=SRKEY:SRSECRET
"""

MSK_SCRAM_JAVA = f"""bootstrap.servers = b-1.demo.kafka.us-east-1.amazonaws.com:9096,b-2.demo.kafka.us-east-1.amazonaws.com:9096
security.protocol: SASL_SSL
sasl.mechanism SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\
    username="alice" \\
    password="{SECRET}";
"""


def write(tmp_path: Path, text: str, name: str = "client.properties") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


# --- the properties file ---------------------------------------------------------------------

def test_properties_follow_javas_grammar() -> None:
    text = "a=1\n  b : 2\nc 3\n# x=9\n! y=9\nd=long \\\n    value\ne=x\\=y\\u0041\\\\\nf\n"
    assert parse_properties(text) == {"a": "1", "b": "2", "c": "3", "d": "long value", "e": "x=yA\\", "f": ""}


def test_confluent_cloud_file_reads_unchanged_and_ignores_client_tuning(tmp_path: Path) -> None:
    c = resolve_connection(config_file=write(tmp_path, CONFLUENT_CLOUD), environ={})
    assert (c.security_protocol, c.sasl_mechanism, c.sasl_username) == (SecurityProtocol.SASL_SSL, SaslMechanism.PLAIN, "ABCDEFGHIJ")
    assert c.sasl_password is not None and c.sasl_password.get_secret_value() == SECRET
    assert c.bootstrap_servers == "pkc-abc12.us-west-2.aws.confluent.cloud:9092"
    props = read_client_properties(CONFLUENT_CLOUD, "cc")
    assert props.ignored == ("session.timeout.ms", "client.dns.lookup", "acks", "schema.registry.url",
                             "basic.auth.credentials.source", "basic.auth.user.info")
    assert SECRET not in repr(props) and "SRSECRET" not in repr(props)


def test_msk_scram_java_file_with_a_continued_jaas_line(tmp_path: Path) -> None:
    c = resolve_connection(config_file=write(tmp_path, MSK_SCRAM_JAVA), environ={})
    assert c.sasl_mechanism is SaslMechanism.SCRAM_SHA_512 and c.sasl_username == "alice"
    assert c.sasl_password is not None and c.sasl_password.get_secret_value() == SECRET
    assert c.hosts() == [("b-1.demo.kafka.us-east-1.amazonaws.com", 9096), ("b-2.demo.kafka.us-east-1.amazonaws.com", 9096)]
    assert c.where("sasl_password").startswith("sasl.jaas.config in ")


def test_jaas_quotes_and_mechanism_inferred_from_the_login_module() -> None:
    j = parse_jaas("org.apache.kafka.common.security.plain.PlainLoginModule required username='k' password=\"p\\\"q\";")
    assert j.options == {"username": "k", "password": 'p"q'} and "p\\\"q" not in repr(j) and 'p"q' not in repr(j)
    props = read_client_properties("security.protocol=SASL_SSL\nsasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
                                   "required username=u password=pw;\n", "f")
    assert props.values["sasl_mechanism"] == "PLAIN"


def test_pem_stores_of_the_java_client(tmp_path: Path) -> None:
    text = ("security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location=/x/ca.pem\nssl.keystore.type=PEM\n"
            "ssl.keystore.location=/x/client.pem\nssl.key.password=kp\nssl.endpoint.identification.algorithm=\n")
    c = resolve_connection(config_file=write(tmp_path, text), environ={})
    assert (c.ssl_ca_location, c.ssl_certificate_location, c.ssl_key_location) == ("/x/ca.pem", "/x/client.pem", None)
    assert c.ssl_check_hostname is False and c.ssl_key_password is not None


def test_every_key_it_cannot_honour_is_named_in_one_error() -> None:
    text = (f"security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI\nsasl.kerberos.service.name=kafka\nssl.truststore.type=JKS\n"
            f"ssl.truststore.location=/tmp/kafka.client.truststore.jks\nssl.truststore.password={SECRET}\n"
            "sasl.client.callback.handler.class=software.amazon.msk.auth.iam.IAMClientCallbackHandler\nssl.cipher.suites=X\n"
            "ssl.keystore.location=/x/keystore.p12\nacks=all\n")
    with pytest.raises(KafkaSetupError) as e:
        read_client_properties(text, "my.properties")
    msg = str(e.value)
    for key in ("sasl.mechanism=GSSAPI", "sasl.kerberos.service.name", "ssl.truststore.type=JKS", "sasl.client.callback.handler.class",
                "ssl.cipher.suites", "ssl.keystore.location"):
        assert key in msg
    assert "6 keys" in msg and "my.properties" in msg and "\n" not in msg
    assert SECRET not in msg and "acks" not in msg  # a harmless store password is ignored, never shown
    assert "HIVESTREAM_KAFKA_OAUTH_TOKEN_PROVIDER" in msg  # the MSK IAM hint, once


def test_a_broken_jaas_line_never_shows_its_password() -> None:
    for jaas in (f'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="{SECRET}"',
                 f'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="{SECRET}',
                 f'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" token="{SECRET}";',
                 f'com.example.Other required password="{SECRET}";'):
        with pytest.raises(KafkaSetupError) as e:
            read_client_properties(f"security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.jaas.config={jaas}\n", "f")
        assert SECRET not in str(e.value) and "sasl.jaas.config" in str(e.value)


def test_mechanism_and_login_module_must_agree() -> None:
    with pytest.raises(KafkaSetupError, match=r"PlainLoginModule but sasl\.mechanism is SCRAM-SHA-256"):
        read_client_properties("sasl.mechanism=SCRAM-SHA-256\nsasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
                               "required username=u password=p;\n", "f")


# --- precedence and checks -------------------------------------------------------------------

def test_options_beat_environment_beat_file(tmp_path: Path) -> None:
    f = write(tmp_path, "bootstrap.servers=file:1\nsecurity.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.username=file-user\n"
                        "sasl.password=file-pw\n")
    env = {"HIVESTREAM_KAFKA_CONFIG": str(f), "KAFKA_BOOTSTRAP_SERVERS": "env:2", "HIVESTREAM_KAFKA_SASL_USERNAME": "env-user",
           "HIVESTREAM_KAFKA_SASL_MECHANISM": ""}
    c = resolve_connection(environ=env)
    assert (c.bootstrap_servers, c.sasl_username, c.sasl_mechanism) == ("env:2", "env-user", SaslMechanism.PLAIN)
    assert c.where("bootstrap_servers") == "KAFKA_BOOTSTRAP_SERVERS" and c.where("sasl_mechanism") == f"sasl.mechanism in {f}"
    c = resolve_connection(bootstrap="opt:3", environ=env, sasl_username="opt-user")
    assert (c.bootstrap_servers, c.sasl_username) == ("opt:3", "opt-user")
    other = write(tmp_path, "bootstrap.servers=other:4\n", "other.properties")
    assert resolve_connection(config_file=other, environ={"HIVESTREAM_KAFKA_CONFIG": str(f)}).bootstrap_servers == "other:4"
    assert resolve_connection(environ={}).bootstrap_servers == "127.0.0.1:19092"


@pytest.mark.parametrize(("env", "says"), [
    ({"HIVESTREAM_KAFKA_SECURITY_PROTOCOL": "SASL_SSL"}, "needs a SASL mechanism"),
    ({"HIVESTREAM_KAFKA_SASL_MECHANISM": "PLAIN", "HIVESTREAM_KAFKA_SASL_USERNAME": "u", "HIVESTREAM_KAFKA_SASL_PASSWORD": SECRET},
     "does not use SASL"),
    ({"HIVESTREAM_KAFKA_SSL_CA_LOCATION": "/ca.pem"}, "does not use TLS"),
    ({"HIVESTREAM_KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "HIVESTREAM_KAFKA_SASL_MECHANISM": "SCRAM-SHA-256",
      "HIVESTREAM_KAFKA_SASL_USERNAME": "u"}, "needs a username and a password"),
    ({"HIVESTREAM_KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "HIVESTREAM_KAFKA_SASL_MECHANISM": "OAUTHBEARER"}, "needs a token provider"),
    ({"HIVESTREAM_KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "HIVESTREAM_KAFKA_SASL_MECHANISM": "GSSAPI"}, "unsupported SASL mechanism 'GSSAPI'"),
    ({"HIVESTREAM_KAFKA_SECURITY_PROTOCOL": "TLS"}, "unknown security protocol (the value of HIVESTREAM_KAFKA_SECURITY_PROTOCOL is not shown"),
    ({"HIVESTREAM_KAFKA_SECURITY_PROTOCOL": "s3cr3t-pw"}, "one of PLAINTEXT"),
    ({"HIVESTREAM_KAFKA_SASL_MECHANISM": "s3cr3t-pw", "HIVESTREAM_KAFKA_SECURITY_PROTOCOL": "SASL_SSL"}, "(a value not shown)"),
    ({"KAFKA_BOOTSTRAP_SERVERS": "alice:s3cr3t-pw@b1:9092"}, "holds '@'"),
    ({"KAFKA_BOOTSTRAP_SERVERS": "b1:99999"}, "port 1-65535"),
    ({"HIVESTREAM_KAFKA_SASL_PASSWORD": "s3cr3t-pw"}, "(the default: set security.protocol"),
    ({"HIVESTREAM_KAFKA_SECURITY_PROTOCOL": "SSL", "HIVESTREAM_KAFKA_SSL_KEY_LOCATION": "/k.pem"}, "without its certificate"),
    ({"KAFKA_BOOTSTRAP_SERVERS": "host:port"}, "is not host:port"),
    ({"HIVESTREAM_KAFKA_CONFIG": "/nonexistent/client.properties"}, "cannot read the Kafka client properties file"),
])
def test_settings_that_cannot_work_are_one_line(env: dict[str, str], says: str) -> None:
    with pytest.raises(KafkaSetupError) as e:
        resolve_connection(environ=env)
    assert says in str(e.value) and "\n" not in str(e.value) and SECRET not in str(e.value) and "s3cr3t-pw" not in str(e.value)


# --- builders --------------------------------------------------------------------------------

def test_builders_for_sasl_plaintext_and_plaintext() -> None:
    c = resolve_connection(bootstrap="h1:9092, h2:9093", environ={"HIVESTREAM_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
                                                                   "HIVESTREAM_KAFKA_SASL_MECHANISM": "scram-sha-256",
                                                                   "HIVESTREAM_KAFKA_SASL_USERNAME": "u", "HIVESTREAM_KAFKA_SASL_PASSWORD": SECRET})
    kw = aiokafka_kwargs(c)
    assert kw["bootstrap_servers"] == ["h1:9092", "h2:9093"] and kw["security_protocol"] == "SASL_PLAINTEXT"
    assert (kw["sasl_mechanism"], kw["sasl_plain_username"], kw["sasl_plain_password"]) == ("SCRAM-SHA-256", "u", SECRET)
    assert SECRET not in repr(kw) and "ssl_context" not in kw
    assert kafka_python_kwargs(c)["sasl_plain_password"] == SECRET
    creds = faust_credentials(c)
    assert (creds.protocol.value, creds.mechanism.value, creds.username, creds.password) == ("SASL_PLAINTEXT", "SCRAM-SHA-256", "u", SECRET)
    assert faust_broker(c) == ["kafka://h1:9092", "kafka://h2:9093"]
    assert faust_credentials(KafkaConnection.plain("h:1")) is None


def test_tls_builders_share_one_verifying_context(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text(_self_signed_pem(tmp_path), encoding="utf-8")
    c = resolve_connection(bootstrap="b:9093", environ={"HIVESTREAM_KAFKA_SECURITY_PROTOCOL": "SSL", "HIVESTREAM_KAFKA_SSL_CA_LOCATION": str(ca)})
    ctx = aiokafka_kwargs(c)["ssl_context"]
    assert ctx is kafka_python_kwargs(c)["ssl_context"] and ctx.verify_mode is ssl.CERT_REQUIRED and ctx.check_hostname
    assert faust_credentials(c).context is ctx
    bad = tmp_path / "store.jks"
    bad.write_bytes(b"\xfe\xed\xfe\xed not pem")
    c2 = resolve_connection(bootstrap="b:9093", environ={"HIVESTREAM_KAFKA_SECURITY_PROTOCOL": "SSL", "HIVESTREAM_KAFKA_SSL_CA_LOCATION": str(bad)})
    with pytest.raises(KafkaSetupError, match=r"cannot load the CA file .*PEM only"):
        aiokafka_kwargs(c2)


def _self_signed_pem(tmp_path: Path) -> str:
    key, crt = tmp_path / "k.pem", tmp_path / "c.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(crt), "-days", "2",
                    "-subj", "/CN=test-ca"], check=True, capture_output=True, timeout=60)
    return crt.read_text(encoding="utf-8")


def tokens() -> tuple[str, int]:
    """A token provider as the MSK IAM signer's shape: (token, expiry in epoch ms)."""
    return "tok-123", 4_102_444_800_000


async def test_oauthbearer_token_provider_hook() -> None:
    c = resolve_connection(bootstrap="b:9098", environ={"HIVESTREAM_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
                                                         "HIVESTREAM_KAFKA_SASL_MECHANISM": "OAUTHBEARER",
                                                         "HIVESTREAM_KAFKA_OAUTH_TOKEN_PROVIDER": "tests.streams.test_kafka_connection:tokens"})
    assert await aiokafka_kwargs(c)["sasl_oauth_token_provider"].token() == "tok-123"
    assert kafka_python_kwargs(c)["sasl_oauth_token_provider"].token() == "tok-123"
    assert faust_credentials(c).mechanism.value == "OAUTHBEARER"
    missing = c.model_copy(update={"oauth_token_provider": "tests.no_such_module:fn"})
    with pytest.raises(KafkaSetupError, match="cannot load the token provider"):
        aiokafka_kwargs(missing)


# --- secrets ---------------------------------------------------------------------------------

def test_secrets_never_in_repr_dump_or_logs(caplog: pytest.LogCaptureFixture) -> None:
    c = resolve_connection(environ={"HIVESTREAM_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "HIVESTREAM_KAFKA_SASL_MECHANISM": "PLAIN",
                                    "HIVESTREAM_KAFKA_SASL_USERNAME": "u", "HIVESTREAM_KAFKA_SASL_PASSWORD": SECRET})
    for text in (repr(c), str(c), c.describe(), c.model_dump_json(), str(c.model_dump()), repr(kafka_python_kwargs(c)),
                 repr(faust_credentials(c))):
        assert SECRET not in text
    assert scrub(f"boom {SECRET}!") == "boom ***!"
    handler = logging.StreamHandler()
    handler.addFilter(ScrubSecrets())
    record = logging.LogRecord("kafka", logging.DEBUG, __file__, 1, "Starting with configuration: %s", (kafka_python_kwargs(c) | {"p": SECRET},), None)
    assert handler.filter(record) and SECRET not in record.getMessage()


# --- one-line errors -------------------------------------------------------------------------

class SaslAuthenticationFailed(Exception):  # aiokafka's name
    pass


class UnsupportedSaslMechanismError(Exception):  # kafka-python's name
    pass


class TopicAuthorizationFailedError(Exception):
    pass


class KafkaConnectionError(Exception):
    pass


def _cert_error(message: str) -> ssl.SSLCertVerificationError:
    e = ssl.SSLCertVerificationError(1, message)
    e.verify_message = message
    return e


@pytest.mark.parametrize(("exc", "says"), [
    (ConnectionRefusedError(111, "refused"), "no Kafka broker at b1:9096 (connection refused)"),
    (socket.gaierror(-2, "Name or service not known"), "cannot resolve b1:9096"),
    (TimeoutError(), "no answer from a Kafka broker at b1:9096 within 5 s"),
    (SaslAuthenticationFailed(f"Authentication failed: Invalid username or password {SECRET}"),
     "authentication failed at b1:9096: the broker rejected user 'alice' with SCRAM-SHA-512"),
    (UnsupportedSaslMechanismError(), "does not enable SASL mechanism SCRAM-SHA-512"),
    (_cert_error("self-signed certificate in certificate chain"),
     "was not verified (self-signed certificate in certificate chain): check the CA, HIVESTREAM_KAFKA_SSL_CA_LOCATION"),
    (_cert_error("Hostname mismatch, certificate is not valid for 'b1'."), "does not name that host"),
    (ConnectionResetError(), "closed the connection during the handshake"),
    (KafkaConnectionError("Connection at b1:9096 closed"), "closed the connection during the handshake"),
    (KafkaConnectionError("KafkaConnectionError: 111 ECONNREFUSED"), "a broker of the cluster behind b1:9096 refused the connection"),
    (TopicAuthorizationFailedError(f"Request 'SaslAuthenticate(auth_bytes={SECRET})' failed"),
     "not authorised: the cluster refused access to a topic for user 'alice'"),
])
def test_explain_names_cause_and_setting(exc: BaseException, says: str) -> None:
    c = resolve_connection(environ={"KAFKA_BOOTSTRAP_SERVERS": "b1:9096", "HIVESTREAM_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
                                    "HIVESTREAM_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512", "HIVESTREAM_KAFKA_SASL_USERNAME": "alice",
                                    "HIVESTREAM_KAFKA_SASL_PASSWORD": SECRET})
    line = explain(exc, c, at="b1:9096", timeout_s=5)
    assert says in line and "\n" not in line and SECRET not in line


def test_library_errors_are_mapped_too() -> None:
    from aiokafka.errors import KafkaConnectionError as AioConnectionError
    from kafka.errors import KafkaTimeoutError, NotEnoughReplicasError, SaslAuthenticationFailedError

    assert "could not connect to any Kafka broker" in explain(AioConnectionError("Unable to bootstrap from [('h', 1, 2)]"))
    assert "no answer from a Kafka broker" in explain(KafkaTimeoutError("Unable to bootstrap from h:1"))
    assert "authentication failed" in explain(SaslAuthenticationFailedError())
    assert "not enough in-sync replicas" in explain(NotEnoughReplicasError())


# --- topic checks ----------------------------------------------------------------------------

def test_creation_request_uses_the_broker_default_unless_told() -> None:
    spec = TopicSpec("ns.hook-events", 4, {"retention.ms": "-1"})
    assert creation_request(spec) == ("ns.hook-events", 4, -1, {"retention.ms": "-1"})
    assert creation_request(spec, 3, 2) == ("ns.hook-events", 4, 3, {"retention.ms": "-1", "min.insync.replicas": "2"})


def test_differences_name_each_one() -> None:
    specs = [TopicSpec("a", 4, {"retention.ms": "-1"}), TopicSpec("b", 1, {"cleanup.policy": "compact"}), TopicSpec("c", 1), TopicSpec("d", 1)]
    states = {"a": TopicState("a", 8, 1, 1, 1, {"retention.ms": "604800000", "min.insync.replicas": "1", "cleanup.policy": "delete"}),
              "b": TopicState("b", 1, 3, 3, 2, {"cleanup.policy": "delete", "min.insync.replicas": "4"})}
    diffs = differences(specs, states, replication_factor=3, min_insync_replicas=2, optional=frozenset({"d"}))
    assert diffs == ["a: 8 partitions, expected 4 (--partitions / HIVESTREAM_PARTITIONS)",
                     "a: 1 replicas, expected 3 (--replication-factor / HIVESTREAM_REPLICATION_FACTOR)",
                     "a: min.insync.replicas 1, expected 2 (HIVESTREAM_MIN_INSYNC_REPLICAS)",
                     "a: retention.ms=604800000, expected -1",
                     "b: min.insync.replicas 4, expected 2 (HIVESTREAM_MIN_INSYNC_REPLICAS)",
                     "b: min.insync.replicas 4 is above its 3 replicas (brokers before Kafka 4 refuse every acks=all write to it)",
                     "b: cleanup.policy=delete, expected compact",
                     "c: missing (`hivestream topics` creates it)"]
    ok = {"a": TopicState("a", 4, 3, 3, 3, {"retention.ms": "-1", "min.insync.replicas": "2", "cleanup.policy": "delete"})}
    assert differences(specs[:1], ok, replication_factor=3, min_insync_replicas=2) == []


def test_a_max_message_bytes_below_a_batch_is_a_difference() -> None:
    specs = [TopicSpec("f", 4), TopicSpec("g", 4), TopicSpec("h", 4)]
    states = {"f": TopicState("f", 4, 1, 1, 1, {"max.message.bytes": "200"}),
              "g": TopicState("g", 4, 1, 1, 1, {"max.message.bytes": "1048588"}),  # Kafka's default takes a full batch
              "h": TopicState("h", 4, 1, 1, 1, {})}  # not reported: not judged
    assert differences(specs, states, replication_factor=None, min_insync_replicas=None, batch_bytes=1_048_576) == [
        "f: max.message.bytes=200 is below hivestream's 1,048,576-byte batches (the broker refuses a full batch and a worker "
        "stops on it): raise it to at least 1048576"]
    assert differences(specs, states, replication_factor=None, min_insync_replicas=None) == []  # not asked
    assert message_limit(states["f"], 200) is None and message_limit(states["f"], 201) is not None
    spec = TopicSpec("ns.frames", 4)
    assert output_problems(spec, TopicState("ns.frames", 4, 1, 1, 1, {"max.message.bytes": "1048588"}), 1_048_576) == []
    assert output_problems(spec, TopicState("ns.frames", 1, 1, 1, 1, {"max.message.bytes": "1000"}), 1_048_576) == [
        "ns.frames has 1 partition(s) but the worker writes 4 (one per input partition): the topic was recreated or changed under "
        "the namespace",
        "ns.frames: max.message.bytes=1,000 is below hivestream's 1,048,576-byte batches (the broker refuses a full batch and a "
        "worker stops on it): raise it to at least 1048576"]


def test_state_mismatch() -> None:
    assert state_mismatch("ns.hook-events", 4, [TopicState("ns-dedup-dedup-state-changelog", 4, 1, 1, 1)]) is None
    why = state_mismatch("ns.hook-events", 8, [TopicState("ns-dedup-dedup-state-changelog", 4, 1, 1, 1)])
    assert why is not None and "ns.hook-events has 8 partitions but ns-dedup-dedup-state-changelog" in why and "has 4" in why


# --- the source tree and the CLI -------------------------------------------------------------

CONSTRUCTORS = {"KafkaProducer", "KafkaConsumer", "KafkaAdminClient", "AIOKafkaProducer", "AIOKafkaConsumer", "create_conn"}


def constructor_calls(source: str) -> list[tuple[int, str]]:
    """(line, name) of every call of a Kafka client constructor (or faust.App / a ``from faust import App``) in ``source``."""
    tree = ast.parse(source)
    app_names = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == "faust"
                 for a in n.names if a.name == "App"}
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        faust_attr = isinstance(f, ast.Attribute) and f.attr == "App" and isinstance(f.value, ast.Name) and f.value.id == "faust"
        if faust_attr or (isinstance(f, ast.Name) and f.id in app_names):
            found.append((node.lineno, "faust.App"))
        else:
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            if name in CONSTRUCTORS:
                found.append((node.lineno, name))
    return sorted(found)


def test_the_constructor_check_can_fail() -> None:
    src = ("import faust\nfrom faust import App as A\nfrom aiokafka import AIOKafkaProducer\nimport kafka\n"
           "p = AIOKafkaProducer(bootstrap_servers='x')\na = faust.App('id')\nb = A('id')\nc = kafka.KafkaAdminClient()\nd = faust.Table\n")
    assert constructor_calls(src) == [(5, "AIOKafkaProducer"), (6, "faust.App"), (7, "faust.App"), (8, "KafkaAdminClient")]


def test_no_kafka_client_is_made_outside_the_clients_module() -> None:
    """Every client comes from streams/kafka/clients.py (and the preflight's raw connection from preflight.py); bench/ and tests/ may make their own."""
    allowed = {"streams/kafka/clients.py": {"KafkaProducer", "KafkaConsumer", "KafkaAdminClient", "AIOKafkaProducer", "AIOKafkaConsumer",
                                            "faust.App"},
               "streams/kafka/preflight.py": {"create_conn"}}
    found = []
    for pkg in ("streams", "projections", "hivestream"):
        for path in sorted((REPO_ROOT / pkg).rglob("*.py")):
            rel = str(path.relative_to(REPO_ROOT))
            found += [f"{rel}:{line}: {name}" for line, name in constructor_calls(path.read_text(encoding="utf-8"))
                      if name not in allowed.get(rel, set())]
    assert found == []
    made = constructor_calls((REPO_ROOT / "streams/kafka/clients.py").read_text(encoding="utf-8"))
    assert {name for _l, name in made} == allowed["streams/kafka/clients.py"]


def _commands() -> list[tuple[str, set[str]]]:
    from hivestream.cli.app import app

    out: list[tuple[str, set[str]]] = []

    def walk(cmd: object, path: str) -> None:
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(sub, f"{path} {name}")
        else:
            out.append((path.strip(), {o for p in getattr(cmd, "params", []) for o in getattr(p, "opts", [])}))

    walk(typer.main.get_command(app), "")
    return out


def test_every_kafka_command_takes_kafka_config() -> None:
    kafka = [(name, opts) for name, opts in _commands() if "--bootstrap" in opts]
    assert len(kafka) >= 16  # topics, produce, worker, reprocess, project, replay, lag, ingest, kb x4, stubs x4
    assert [name for name, opts in kafka if "--kafka-config" not in opts] == []
    creators = [name for name, opts in kafka if "--partitions" in opts]
    assert [name for name in creators if "--replication-factor" not in dict(kafka)[name]] == []


def _cli(*args: str, env: dict[str, str], timeout: int = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hivestream", *args], cwd=REPO_ROOT, env={**os.environ, **env}, capture_output=True,
                          text=True, timeout=timeout)


def test_help_and_config_errors_print_no_secret(tmp_path: Path) -> None:
    env = {"HIVESTREAM_KAFKA_SASL_PASSWORD": SECRET, "HIVESTREAM_KAFKA_SASL_MECHANISM": "PLAIN", "HIVESTREAM_KAFKA_SASL_USERNAME": "u"}
    for cmd in (["topics", "--help"], ["worker", "--help"], ["ingest", "--help"], ["stubs", "produce", "--help"]):
        r = _cli(*cmd, env=env)
        assert r.returncode == 0 and SECRET not in r.stdout + r.stderr and "--kafka-config" in r.stdout
    broken = write(tmp_path, f'security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.jaas.config=org.apache.kafka.common.security.plain.'
                             f'PlainLoginModule required username="u" password="{SECRET}"\n')
    for args, extra in ((["topics", "--kafka-config", str(broken)], {}), (["produce", str(broken)], {"HIVESTREAM_KAFKA_CONFIG": str(broken)}),
                        (["topics"], env)):
        r = _cli(*args, env={"KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:9", **extra})
        assert r.returncode == 2, r.stderr
        assert SECRET not in r.stdout + r.stderr and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_admin_requests_go_on_when_one_broker_refuses_and_stop_after_the_last_try(monkeypatch: pytest.MonkeyPatch) -> None:
    """kafka-python 3.x sends an admin request to one node and raises at once when it is down; the
    admin of :func:`streams.kafka.clients.kafka_admin` tries again (another node), a bounded number of times."""
    from kafka.errors import KafkaConnectionError as Refused
    from kafka.errors import UnknownTopicOrPartitionError

    from streams.kafka import clients

    monkeypatch.setattr(clients.time, "sleep", lambda _s: None)

    class FakeAdmin:
        def __init__(self, fail: int, error: type[Exception] = Refused) -> None:
            self.fail, self.calls, self.error, self.closed = fail, 0, error, False

        def list_topics(self) -> list[str]:
            self.calls += 1
            if self.calls <= self.fail:
                raise self.error("KafkaConnectionError: 111 ECONNREFUSED")
            return ["t"]

        def close(self) -> None:
            self.closed = True

    ok = FakeAdmin(fail=clients.ADMIN_ATTEMPTS - 1)
    assert clients._RetryingAdmin(ok).list_topics() == ["t"] and ok.calls == clients.ADMIN_ATTEMPTS
    down = FakeAdmin(fail=clients.ADMIN_ATTEMPTS)
    with pytest.raises(Refused):
        clients._RetryingAdmin(down).list_topics()
    assert down.calls == clients.ADMIN_ATTEMPTS
    from kafka.errors import CoordinatorNotAvailableError

    fresh = FakeAdmin(fail=2, error=CoordinatorNotAvailableError)  # a fresh cluster: no group coordinator yet
    assert clients._RetryingAdmin(fresh).list_topics() == ["t"] and fresh.calls == 3
    other = FakeAdmin(fail=1, error=UnknownTopicOrPartitionError)
    with pytest.raises(UnknownTopicOrPartitionError):
        clients._RetryingAdmin(other).list_topics()
    assert other.calls == 1  # not a connection error: raised at once
    wrapped = clients._RetryingAdmin(ok)
    wrapped.close()
    assert ok.closed


def test_services_wait_for_a_cluster_that_has_too_few_brokers_commands_do_not(monkeypatch: pytest.MonkeyPatch,
                                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A worker started during a rolling restart (2 of 3 brokers registered) waits for its topics;
    ``topics``/``produce`` fail at once; a refusal that cannot pass is raised at once either way."""
    from hivestream.cli import kafka_opts
    from streams.kafka.connection import KafkaConnection
    from streams.settings import Settings

    class InvalidReplicationFactorError(Exception):
        pass

    class TopicAuthorizationFailedError(Exception):
        pass

    calls: list[int] = []

    def ensure(_conn: object, _specs: object, **_kw: object) -> list[str]:
        calls.append(1)
        if len(calls) < 3:
            raise InvalidReplicationFactorError("only 2 broker(s) are registered")
        return ["ns.hook-events"]

    now = [0.0]
    monkeypatch.setattr(kafka_opts, "ensure_topics", ensure)
    conn, s = KafkaConnection.plain("b1:9092"), Settings()
    fake = {"sleep": lambda d: now.__setitem__(0, now[0] + d), "clock": lambda: now[0]}
    assert kafka_opts.create_topics(conn, s, [], wait_s=60, **fake) == ["ns.hook-events"]  # type: ignore[arg-type]
    assert len(calls) == 3 and now[0] == 10.0
    assert capsys.readouterr().err.count("waiting for the cluster to take the topics") == 2
    calls.clear()
    with pytest.raises(InvalidReplicationFactorError):
        kafka_opts.create_topics(conn, s, [])  # a command: no wait
    calls.clear()
    with pytest.raises(InvalidReplicationFactorError):
        kafka_opts.create_topics(conn, s, [], wait_s=4, **fake)  # type: ignore[arg-type]  # the wait is bounded
    assert len(calls) == 2

    def refused(_conn: object, _specs: object, **_kw: object) -> list[str]:
        calls.append(1)
        raise TopicAuthorizationFailedError("not authorised")

    monkeypatch.setattr(kafka_opts, "ensure_topics", refused)
    calls.clear()
    with pytest.raises(TopicAuthorizationFailedError):
        kafka_opts.create_topics(conn, s, [], wait_s=60, **fake)  # type: ignore[arg-type]
    assert len(calls) == 1
