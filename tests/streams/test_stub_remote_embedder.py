"""The embedder setting: an OpenAI-compatible /embeddings endpoint (against a local fake) or the local MiniLM."""

from __future__ import annotations

import numpy as np
import pytest

from streams.stubs.embedder import available
from streams.stubs.embedder_choice import EmbedderSettings, EmbedderUnavailable, make_embedder
from streams.stubs.remote_embedder import EmbedderError, RemoteEmbedder, embeddings_url, shown_url
from tests.support.embeddings_fake import EmbeddingsFake, bag_of_words

KEY = "sk-test-0123456789abcdef"


def test_vectors_in_input_order_with_model_and_key() -> None:
    with EmbeddingsFake(dim=32) as fake:
        emb = RemoteEmbedder(fake.base_url, "fake-embed-1", KEY, timeout_s=5)
        out = emb.embed(["trello boards and cards", "deploy the ads database", "trello"])
    assert out.shape == (3, 32) and out.dtype == np.float32
    assert out[0].tolist() == bag_of_words("trello boards and cards", 32)  # the fake answers in reverse order
    assert out[2].tolist() == bag_of_words("trello", 32)
    assert emb.dim == 32
    req = fake.requests[0]
    assert req["path"] == "/v1/embeddings"
    assert req["body"] == {"model": "fake-embed-1", "input": ["trello boards and cards", "deploy the ads database", "trello"], "encoding_format": "float"}
    assert req["headers"]["Authorization"] == f"Bearer {KEY}"
    assert KEY not in repr(emb)


def test_dimensions_asked_for_and_no_key_header_without_a_key() -> None:
    with EmbeddingsFake(dim=16) as fake:
        RemoteEmbedder(fake.base_url + "/embeddings", "m", None, dimensions=16).embed(["x"])
    assert fake.requests[0]["body"]["dimensions"] == 16
    assert "Authorization" not in fake.requests[0]["headers"]


@pytest.mark.parametrize(("fault", "says"), [
    ((401, b'{"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}'), "answered HTTP 401: Incorrect API key provided"),
    ((500, b"upstream\nexploded"), "answered HTTP 500: upstream exploded"),
    ((200, b"not json"), "not JSON"),
    ((200, b'{"data": []}'), "answered 0 embeddings for 2 texts"),
    ((200, b'{"data": [{"index": 0, "embedding": [1, 2]}, {"index": 0, "embedding": [1, 2]}]}'), "bad or repeated index 0"),
    ((200, b'{"data": [{"index": 0, "embedding": "AAAA"}, {"index": 1, "embedding": [1]}]}'), "not a list of numbers"),
    ((200, b'{"data": [{"index": 0, "embedding": [1, 2]}, {"index": 1, "embedding": [1]}]}'), "several dimensions [1, 2]"),
    ((200, b'{"data": [{"index": 0, "embedding": [1e300, 2]}, {"index": 1, "embedding": [1, 1]}]}'), "beyond float32"),
    ((200, b'{"data": [{"index": 0, "embedding": [0, 0]}, {"index": 1, "embedding": [1, 1]}]}'), "all-zero vector"),
])
def test_bad_answers_are_one_line_without_the_key(fault: tuple[int, bytes], says: str) -> None:
    with EmbeddingsFake(fault=fault) as fake:
        emb = RemoteEmbedder(fake.base_url, "m", KEY, timeout_s=5)
        with pytest.raises(EmbedderError) as ei:
            emb.embed(["a", "b"])
    msg = str(ei.value)
    assert says in msg and "\n" not in msg and KEY not in msg
    assert shown_url(fake.base_url + "/embeddings") in msg


def test_timeout_and_unreachable() -> None:
    with EmbeddingsFake(delay_s=1.0) as fake:
        with pytest.raises(EmbedderError, match=r"did not answer within 0.2 s"):
            RemoteEmbedder(fake.base_url, "m", KEY, timeout_s=0.2).embed(["a"])
        url = fake.base_url
    with pytest.raises(EmbedderError, match="unreachable: ConnectError"):
        RemoteEmbedder(url, "m", KEY, timeout_s=2).embed(["a"])


def test_urls_shown_without_secrets() -> None:
    assert shown_url("https://user:pw@example.com:8443/v1beta/openai/embeddings?key=SECRET") == "https://example.com:8443/v1beta/openai/embeddings"
    assert embeddings_url("http://127.0.0.1:11434/v1/") == "http://127.0.0.1:11434/v1/embeddings"
    with pytest.raises(ValueError, match="http"):
        embeddings_url("ftp://example.com")


def test_choice_from_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(EmbedderUnavailable, match="HIVESTREAM_EMBED_MODEL is not"):
        make_embedder(EmbedderSettings(url="http://127.0.0.1:1/v1"))
    with pytest.raises(EmbedderUnavailable, match="http"):
        make_embedder(EmbedderSettings(url="nope", model="m"))
    with EmbeddingsFake(dim=8) as fake:
        monkeypatch.setenv("HIVESTREAM_EMBED_URL", fake.base_url)
        monkeypatch.setenv("HIVESTREAM_EMBED_MODEL", "gemini-embedding-001")
        monkeypatch.setenv("HIVESTREAM_EMBED_KEY_ENV", "MY_GEMINI_KEY")
        monkeypatch.setenv("MY_GEMINI_KEY", KEY)
        s = EmbedderSettings()
        emb = make_embedder(s)
        assert emb.model_name == "gemini-embedding-001" and emb.embed(["q"]).shape == (1, 8)
        assert KEY not in s.describe() and "gemini-embedding-001 at http://127.0.0.1:" in s.describe()
    assert fake.requests[0]["headers"]["Authorization"] == f"Bearer {KEY}"


@pytest.mark.skipif(not available(), reason="the minilm extra is not installed (make install-minilm)")
def test_local_minilm_is_the_default() -> None:
    emb = make_embedder(EmbedderSettings(_env_file=None), env={})
    assert emb.model_name == "sentence-transformers/all-MiniLM-L6-v2"
    assert emb.embed(["hello"]).shape == (1, 384)
    assert len(emb.tokenize([" ".join(["word"] * 300)])[0]) == 128  # type: ignore[attr-defined]
    assert len(make_embedder(EmbedderSettings(max_tokens=256), env={}).tokenize([" ".join(["word"] * 300)])[0]) == 256  # type: ignore[attr-defined]
