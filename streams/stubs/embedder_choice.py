"""Which embedder makes live stub and prompt embeddings: the local MiniLM, or an OpenAI-compatible endpoint.

The same model must embed a stub when it is written and a prompt when it is matched, or nothing
matches (the seed's rule): every stub and message event carries the model's name and dimension,
and the matcher never compares vectors of two models. The choice, from ``HIVESTREAM_EMBED_*``
environment variables or arguments:

* no URL: all-MiniLM-L6-v2 in numpy (:mod:`streams.stubs.embedder`, the ``minilm`` extra), the
  default whenever it is installed, so nothing needs configuring;
* ``HIVESTREAM_EMBED_URL`` and ``HIVESTREAM_EMBED_MODEL``: that endpoint and model
  (:mod:`streams.stubs.remote_embedder`), e.g. Gemini's ``gemini-embedding-001`` to keep matching
  the vectors of a NanoClaw ``stubs.db``; the key is read from the environment variable
  ``HIVESTREAM_EMBED_KEY_ENV`` names (default ``HIVESTREAM_EMBED_API_KEY``), never printed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Protocol

import numpy as np
import numpy.typing as npt
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from streams.stubs.events import MAX_DIM

F32 = npt.NDArray[np.float32]


class Embedder(Protocol):
    """What stubs need of an embedder: a model name and ``embed(texts) -> (len(texts), dim) float32``."""

    @property
    def model_name(self) -> str:
        """The model name recorded on every stub and message it embeds."""
        ...

    def embed(self, texts: list[str]) -> F32:
        """One vector per text, shape ``(len(texts), dim)`` float32."""
        ...


class EmbedderUnavailable(RuntimeError):
    """No embedder can be made from the settings; the message (one line) says what to install or set."""


class EmbedderSettings(BaseSettings):
    """The embedder setting (environment ``HIVESTREAM_EMBED_*``).

    Attributes:
        url: base URL of an OpenAI-compatible embeddings API (``…/v1``, or the whole ``…/embeddings``);
            ``None`` = the local MiniLM.
        model: the endpoint's model name (required with ``url``).
        key_env: the environment variable holding the endpoint's key (unset or empty: no key sent).
        timeout_s: one request's timeout (seconds).
        dimensions: ask the endpoint for this many dimensions (``None``: the model's own).
        max_tokens: word pieces the local model embeds per text (its ``max_seq_length``); default
            128, the truncation ``tokenizer.json`` itself ships with: a 250-word prompt then embeds in
            about a third of the time of the model's 256 (``bench/bench_stub_hook.py``), and stub
            texts, short, are unaffected. Must be the same at write and read time, as the model.
        threads: numpy BLAS threads of the local model while it embeds (default 1: one prompt at a
            time is answered fastest single-threaded on a shared machine; ``bench/bench_stub_hook.py``).
    """

    model_config = SettingsConfigDict(env_prefix="HIVESTREAM_EMBED_", extra="ignore")

    url: str | None = None
    model: str | None = None
    key_env: str = Field("HIVESTREAM_EMBED_API_KEY", min_length=1)
    timeout_s: float = Field(10.0, gt=0, le=600)
    dimensions: int | None = Field(None, ge=1, le=MAX_DIM)
    max_tokens: int = Field(128, ge=2, le=256)
    threads: int = Field(1, ge=1, le=64)

    def describe(self) -> str:
        """One line naming the embedder these settings choose (never the key)."""
        if self.url:
            from streams.stubs.remote_embedder import shown_url

            return f"{self.model or '(no model)'} at {shown_url(self.url)}"
        from streams.stubs.embedder import MODEL_NAME

        return f"{MODEL_NAME} (local, numpy)"


def make_embedder(settings: EmbedderSettings | None = None, env: Mapping[str, str] | None = None) -> Embedder:
    """The embedder ``settings`` choose (default: from the environment); ``env`` holds the key variable (default ``os.environ``).

    Loading the local model reads about 90 MB: make one and keep it.

    Raises:
        EmbedderUnavailable: a URL without a model, a bad URL, or no URL and the ``minilm`` extra not installed.
    """
    s = settings or EmbedderSettings()
    environ = os.environ if env is None else env
    if s.url:
        if not s.model:
            raise EmbedderUnavailable("HIVESTREAM_EMBED_URL is set but HIVESTREAM_EMBED_MODEL is not: name the endpoint's embedding model")
        from streams.stubs.remote_embedder import RemoteEmbedder

        try:
            return RemoteEmbedder(s.url, s.model, environ.get(s.key_env) or None, timeout_s=s.timeout_s, dimensions=s.dimensions)
        except ValueError as e:
            raise EmbedderUnavailable(str(e)) from None
    from streams.stubs.embedder import INSTALL_COMMAND, MiniLMEmbedder, available

    if not available():
        raise EmbedderUnavailable(f"no embedder: install the local all-MiniLM-L6-v2 (`make install-minilm`, or {INSTALL_COMMAND}) "
                                  "or set HIVESTREAM_EMBED_URL and HIVESTREAM_EMBED_MODEL to an OpenAI-compatible /embeddings endpoint")
    try:
        return MiniLMEmbedder(max_seq_length=s.max_tokens, blas_threads=s.threads)
    except (RuntimeError, ValueError, OSError) as e:
        raise EmbedderUnavailable(f"the local all-MiniLM-L6-v2 could not be loaded: {e}") from None
