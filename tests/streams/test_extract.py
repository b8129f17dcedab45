"""Server-side experience extraction against a local chat-completions server (tests/support/openai_stub_server.py)."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import SecretStr

from streams.experiences.extract import (
    SYSTEM_PROMPT,
    TRUNCATION_NOTE,
    ChatClient,
    ExtractedItem,
    ExtractionError,
    ExtractionReason,
    build_messages,
    extract,
    keep_confident,
    parse_answer,
)
from tests.support.openai_stub_server import OpenAIStubServer, RecordedRequest, Reply, completion_body

SECRET = "sk-test-123"
MODEL = "stub-model"


def redact_test_key(text: str) -> str:
    return text.replace(SECRET, "[REDACTED]")


def item(task: Any = "deploy the docs", confidence: Any = 0.9, **extra: Any) -> dict[str, Any]:
    return {"task": task, "resource": "mkdocs gh-deploy", "result": "worked after setting site_url", "confidence": confidence, **extra}


TRANSCRIPT: list[dict[str, Any]] = [
    {"role": "user", "content": f"Deploy the docs. My key is {SECRET}."},
    {"role": "assistant", "content": [{"type": "text", "text": "Running mkdocs gh-deploy"}, {"type": "toolCall", "name": "bash", "arguments": {}}]},
    {"role": "toolResult", "content": [{"type": "text", "text": f"deployed with token {SECRET}"}]},
]


@pytest.fixture
def server() -> Iterator[OpenAIStubServer]:
    with OpenAIStubServer() as srv:
        yield srv


@pytest.fixture
def client(server: OpenAIStubServer) -> Iterator[ChatClient]:
    with ChatClient(server.base_url, MODEL, api_key=SecretStr("bearer-key-xyz"), timeout_s=5.0) as c:
        yield c


def reason_of(exc_info: pytest.ExceptionInfo[ExtractionError]) -> str:
    return str(exc_info.value.reason)


# --- the round trip ---------------------------------------------------------------------------------------------


def test_good_answer_keeps_only_items_above_0_7(server: OpenAIStubServer, client: ChatClient) -> None:
    server.push(Reply.items([item("kept", 0.85), item("at threshold", 0.7), item("low", 0.3)]))
    kept = extract(client, TRANSCRIPT, redactor=redact_test_key)
    assert [i.task for i in kept] == ["kept"]
    assert kept[0] == ExtractedItem(task="kept", resource="mkdocs gh-deploy", result="worked after setting site_url", confidence=0.85)


def test_request_is_redacted_and_well_formed(server: OpenAIStubServer, client: ChatClient) -> None:
    server.push(Reply.items([]))
    assert extract(client, TRANSCRIPT, redactor=redact_test_key) == []
    [request] = server.requests
    assert request.method == "POST"
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer bearer-key-xyz"
    assert request.headers["content-type"] == "application/json"
    assert SECRET not in request.body.decode()
    payload = request.json()
    assert payload["model"] == MODEL
    assert payload["temperature"] == 0
    assert payload["response_format"] == {"type": "json_object"}
    system, user = payload["messages"]
    assert system == {"role": "system", "content": SYSTEM_PROMPT}
    assert user["role"] == "user"
    assert "user: Deploy the docs. My key is [REDACTED]." in user["content"]
    assert "assistant: Running mkdocs gh-deploy" in user["content"]
    assert "toolResult: deployed with token [REDACTED]" in user["content"]


def test_no_authorization_header_without_key(server: OpenAIStubServer) -> None:
    server.push(Reply.items([]))
    with ChatClient(server.base_url + "/", MODEL) as c:
        assert extract(c, TRANSCRIPT) == []
    [request] = server.requests
    assert "authorization" not in request.headers
    assert request.path == "/v1/chat/completions"  # trailing slash on base_url ignored


def test_without_redactor_the_raw_text_is_sent(server: OpenAIStubServer, client: ChatClient) -> None:
    # The control for the redaction test: the secret is in the transcript, so only the redactor keeps it out.
    server.push(Reply.items([]))
    extract(client, TRANSCRIPT)
    assert SECRET in server.requests[0].body.decode()


def test_key_not_in_repr_or_errors(server: OpenAIStubServer, client: ChatClient) -> None:
    server.push(Reply(500, b"boom"))
    with pytest.raises(ExtractionError) as exc_info:
        client.complete(build_messages(TRANSCRIPT))
    assert "bearer-key-xyz" not in repr(client)
    assert "bearer-key-xyz" not in str(exc_info.value)


# --- answer forms -----------------------------------------------------------------------------------------------


def test_bare_array_form_accepted(server: OpenAIStubServer, client: ChatClient) -> None:
    server.push(Reply.items([item("a", 0.95)], wrap=False))
    assert [i.task for i in extract(client, TRANSCRIPT)] == ["a"]


def test_object_form_accepted(server: OpenAIStubServer, client: ChatClient) -> None:
    server.push(Reply.completion(json.dumps({"experiences": [item("a", 0.95), item("b", 1)]})))
    kept = extract(client, TRANSCRIPT)
    assert [(i.task, i.confidence) for i in kept] == [("a", 0.95), ("b", 1.0)]


@pytest.mark.parametrize(
    "content",
    [
        "```json\n" + json.dumps([item("fenced", 0.9)]) + "\n```",
        "  ```\n" + json.dumps({"experiences": [item("fenced", 0.9)]}) + "\n```\n",
        "```JSON\r\n" + json.dumps([item("fenced", 0.9)]) + "```",
    ],
)
def test_fenced_json_accepted(server: OpenAIStubServer, client: ChatClient, content: str) -> None:
    server.push(Reply.completion(content))
    assert [i.task for i in extract(client, TRANSCRIPT)] == ["fenced"]


# --- malformed answers ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        "I found two experiences: deploying docs and fixing CI.",
        "Here you go:\n```json\n[]\n```",  # prose around the fence
        "[{",
        "",
    ],
)
def test_content_not_json(server: OpenAIStubServer, client: ChatClient, content: str) -> None:
    server.push(Reply.completion(content))
    with pytest.raises(ExtractionError) as exc_info:
        extract(client, TRANSCRIPT)
    assert reason_of(exc_info) == "not_json"
    assert exc_info.value.body is not None  # kept for the dead-letter record


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param({"task": "t", "resource": "r", "confidence": 0.9}, id="missing-result"),
        pytest.param(item(extra_field="x"), id="extra-field"),
        pytest.param(item(confidence=1.5), id="confidence-1.5"),
        pytest.param(item(confidence=-0.1), id="confidence-negative"),
        pytest.param(item(confidence="NaN"), id="confidence-NaN-string"),
        pytest.param(item(confidence="0.9"), id="confidence-string"),
        pytest.param(item(confidence=True), id="confidence-bool"),
        pytest.param(item(confidence=None), id="confidence-null"),
        pytest.param(item(task="   "), id="blank-task"),
        pytest.param(item(task=""), id="empty-task"),
        pytest.param(item(task=42), id="task-not-string"),
        pytest.param(item(task="x" * 2001), id="task-too-long"),
        pytest.param({**item(), "result": "x" * 8001}, id="result-too-long"),
        pytest.param({**item(), "resource": "x" * 4001}, id="resource-too-long"),
        pytest.param("just a string", id="item-not-object"),
    ],
)
def test_bad_item_fails_the_whole_answer(server: OpenAIStubServer, client: ChatClient, bad: Any) -> None:
    server.push(Reply.items([item("good", 0.99), bad]))
    with pytest.raises(ExtractionError) as exc_info:
        extract(client, TRANSCRIPT)
    assert reason_of(exc_info) == "bad_item"
    assert "item 1" in exc_info.value.detail


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_bare_non_finite_confidence_is_bad_item(token: str) -> None:
    content = '[{"task": "t", "resource": "", "result": "r", "confidence": ' + token + "}]"
    with pytest.raises(ExtractionError) as exc_info:
        parse_answer(completion_body(content))
    assert reason_of(exc_info) == "bad_item"


def test_edge_values_accepted() -> None:
    content = json.dumps([{"task": "t", "resource": "", "result": "r", "confidence": 0}, item(confidence=1.0), item(task="x" * 2000)])
    items = parse_answer(completion_body(content))
    assert [i.confidence for i in items] == [0.0, 1.0, 0.9]
    assert parse_answer(completion_body("[]")) == []


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        pytest.param(b"<html>gateway</html>", "not_json", id="body-not-json"),
        pytest.param(b"\xff\xfe", "not_json", id="body-not-utf8"),
        pytest.param(b'{"choices": []}', "bad_shape", id="no-choices"),
        pytest.param(b"[]", "bad_shape", id="body-is-list"),
        pytest.param(completion_body(None), "bad_shape", id="content-null"),
        pytest.param(completion_body(None, refusal="I can't help with that"), "bad_shape", id="refusal"),
        pytest.param(completion_body('{"items": []}'), "bad_shape", id="wrong-key"),
        pytest.param(completion_body('{"experiences": [], "extracted_count": 0}'), "bad_shape", id="extra-key"),
        pytest.param(completion_body('{"experiences": {}}'), "bad_shape", id="experiences-not-list"),
        pytest.param(completion_body("42"), "bad_shape", id="content-number"),
        pytest.param(completion_body(json.dumps([item()] * 51)), "bad_shape", id="too-many-items"),
    ],
)
def test_bad_shapes(body: bytes, reason: str) -> None:
    with pytest.raises(ExtractionError) as exc_info:
        parse_answer(body)
    assert reason_of(exc_info) == reason
    assert exc_info.value.body == body


# --- transport failures -----------------------------------------------------------------------------------------


def test_http_500_is_bad_status(server: OpenAIStubServer, client: ChatClient) -> None:
    server.push(Reply(500, b'{"error": {"message": "internal"}}'))
    with pytest.raises(ExtractionError) as exc_info:
        extract(client, TRANSCRIPT)
    assert reason_of(exc_info) == "bad_status"
    assert "500" in exc_info.value.detail


def test_redirect_is_not_followed(server: OpenAIStubServer, client: ChatClient) -> None:
    server.push(Reply(307, b""))
    with pytest.raises(ExtractionError) as exc_info:
        extract(client, TRANSCRIPT)
    assert reason_of(exc_info) == "bad_status"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_connection_refused_is_http_error() -> None:
    with ChatClient(f"http://127.0.0.1:{free_port()}/v1", MODEL, timeout_s=5.0) as c, pytest.raises(ExtractionError) as exc_info:
        extract(c, TRANSCRIPT)
    assert reason_of(exc_info) == "http_error"


def test_slow_server_is_timeout(server: OpenAIStubServer) -> None:
    server.push(Reply.completion("[]", delay_s=3.0))
    started = time.monotonic()
    with ChatClient(server.base_url, MODEL, timeout_s=0.2) as c, pytest.raises(ExtractionError) as exc_info:
        extract(c, TRANSCRIPT)
    assert reason_of(exc_info) == "timeout"
    assert time.monotonic() - started < 2.0


def test_oversized_body_is_too_large(server: OpenAIStubServer) -> None:
    server.push(Reply.completion("[]" + " " * 5000))
    with ChatClient(server.base_url, MODEL, max_response_bytes=1000) as c, pytest.raises(ExtractionError) as exc_info:
        c.complete(build_messages(TRANSCRIPT))
    assert reason_of(exc_info) == "too_large"


def test_scripted_callable_sees_each_request() -> None:
    def script(request: RecordedRequest) -> Reply:
        n = len(request.json()["messages"][1]["content"])
        return Reply.items([item(f"chars={n}", 0.8)])

    with OpenAIStubServer(script) as srv, ChatClient(srv.base_url, MODEL) as c:
        first = extract(c, TRANSCRIPT)
        second = extract(c, TRANSCRIPT[:1])
    assert first[0].task != second[0].task
    assert len(srv.requests) == 2


@pytest.mark.parametrize(
    "url",
    ["http://example.com/v1", "ftp://127.0.0.1/v1", "127.0.0.1:8000/v1", "http://user:pw@127.0.0.1/v1"],
)
def test_insecure_or_bad_base_url_rejected(url: str) -> None:
    with pytest.raises(ValueError):
        ChatClient(url, MODEL)


def test_https_remote_and_loopback_http_allowed() -> None:
    for url in ["https://api.example.com/v1", "http://localhost:8000/v1", "http://127.0.0.2/v1", "http://[::1]:8000/v1"]:
        ChatClient(url, MODEL).close()


# --- pure parts -------------------------------------------------------------------------------------------------


def test_keep_confident_is_strictly_greater() -> None:
    items = [ExtractedItem(task=f"t{c}", resource="", result="r", confidence=c) for c in (0.0, 0.3, 0.7, 0.7000001, 0.71, 1.0)]
    assert [i.confidence for i in keep_confident(items)] == [0.7000001, 0.71, 1.0]
    assert [i.confidence for i in keep_confident(items, threshold=0.0)] == [0.3, 0.7, 0.7000001, 0.71, 1.0]
    with pytest.raises(ValueError):
        keep_confident(items, threshold=float("nan"))


def test_truncation_keeps_the_end() -> None:
    messages = [{"role": "user", "content": f"message number {i:03d}"} for i in range(200)]
    payload = build_messages(messages, max_chars=100)
    user = payload[1]["content"]
    assert TRUNCATION_NOTE in user
    assert "message number 199" in user
    assert "message number 000" not in user
    transcript = user.split(TRUNCATION_NOTE + "\n", 1)[1].removesuffix("\n>>>")
    assert len(transcript) == 100
    full = build_messages(messages, max_chars=1_000_000)[1]["content"]
    assert TRUNCATION_NOTE not in full
    assert full.endswith(transcript + "\n>>>")


def test_redaction_happens_before_truncation() -> None:
    # The cut falls inside the secret: redacting after truncation would leak its tail.
    messages = [{"role": "user", "content": f"x {SECRET} tail"}]
    payload = build_messages(messages, max_chars=len(f"{SECRET} tail") - 3, redactor=redact_test_key)
    assert "test-123" not in payload[1]["content"]
    assert "[REDACTED] tail"[-8:] in payload[1]["content"]


def test_redactor_applied_to_every_message() -> None:
    seen: list[str] = []

    def spy(text: str) -> str:
        seen.append(text)
        return text.upper()

    payload = build_messages(TRANSCRIPT, redactor=spy)
    assert seen == [
        f"user: Deploy the docs. My key is {SECRET}.",
        "assistant: Running mkdocs gh-deploy",
        f"toolResult: deployed with token {SECRET}",
    ]
    assert "ASSISTANT: RUNNING MKDOCS GH-DEPLOY" in payload[1]["content"]


def test_content_flattening() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "assistant", "content": [{"type": "text", "text": "one"}, "two", {"type": "image", "data": "..."}]},
        {"role": "user", "content": [{"type": "tool_result", "content": [{"type": "text", "text": "nested"}]}]},
        {"role": "user", "content": [{"type": "image", "data": "..."}]},  # no text: skipped
        {"content": "no role"},
        {"role": "user", "content": None},
    ]
    user = build_messages(messages)[1]["content"]
    assert "assistant: one\ntwo" in user
    assert "user: nested" in user
    assert "unknown: no role" in user
    assert user.count("user:") == 1


def test_max_chars_must_be_positive() -> None:
    with pytest.raises(ValueError):
        build_messages(TRANSCRIPT, max_chars=0)


def test_error_reason_is_a_str_enum() -> None:
    err = ExtractionError("timeout", "slow")
    assert err.reason is ExtractionReason.TIMEOUT
    code: str = err.reason
    assert code == "timeout"
    assert str(err) == "timeout: slow"
