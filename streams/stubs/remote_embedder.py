"""Sentence embeddings from an OpenAI-compatible ``POST /embeddings`` endpoint (httpx).

The request and answer follow OpenAI's embeddings API, which Gemini (``…/v1beta/openai/``),
Ollama (``…/v1``), llama.cpp's server and vLLM also serve: the request body is ``{"model": M,
"input": [text, ...], "encoding_format": "float"}`` (plus ``"dimensions": D`` when asked for), the
answer ``{"data": [{"index": i, "embedding": [float, ...]}, ...]}``. The key goes in
``Authorization: Bearer KEY`` and never into a message, a log line or an exception; a URL is shown
without its user info and query string (where some services take a key).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]
MAX_ERROR_CHARS = 200
"""Longest piece of an endpoint's own error text quoted in an :class:`EmbedderError`."""


class EmbedderError(RuntimeError):
    """An embedding could not be made; the message is one line naming the cause (never the key)."""


def shown_url(url: str) -> str:
    """``url`` without user info, query or fragment (what may hold a key), for messages."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def embeddings_url(base: str) -> str:
    """The endpoint for a base URL: ``base`` itself when it ends in ``/embeddings``, else ``base + "/embeddings"``.

    Raises:
        ValueError: ``base`` is not an ``http`` or ``https`` URL with a host.
    """
    parts = urlsplit(base.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"embeddings URL must be http(s)://host/..., got {shown_url(base)!r}")
    path = parts.path.rstrip("/")
    if not path.endswith("/embeddings"):
        path += "/embeddings"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


class RemoteEmbedder:
    """A client of one OpenAI-compatible embeddings endpoint, for one model.

    Args:
        url: the base URL (``http://127.0.0.1:11434/v1``) or the full ``…/embeddings`` URL.
        model: the model name sent and recorded on every stub and message (e.g. ``gemini-embedding-001``).
        api_key: the key for ``Authorization: Bearer``, or ``None`` for a local server without one.
        timeout_s: connect and read timeout of one request (seconds, > 0).
        dimensions: ask the endpoint for vectors of this many dimensions (``None``: the model's own).
        transport: an httpx transport (tests).

    Attributes:
        model_name: ``model``.
        dim: the dimension of the vectors seen so far (``dimensions`` before the first call, else ``None``).

    Raises:
        ValueError: a bad URL, an empty model or a timeout that is not positive.
    """

    def __init__(self, url: str, model: str, api_key: str | None = None, *, timeout_s: float = 10.0, dimensions: int | None = None,
                 transport: httpx.BaseTransport | None = None) -> None:
        if not model.strip():
            raise ValueError("the embeddings model name is empty")
        if not timeout_s > 0:
            raise ValueError(f"the embeddings timeout must be > 0 seconds, got {timeout_s}")
        self.url = embeddings_url(url)
        self.model_name = model
        self.dim: int | None = dimensions
        self._dimensions = dimensions
        self._timeout = timeout_s
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(headers=headers, transport=transport, follow_redirects=False)

    def __repr__(self) -> str:
        return f"RemoteEmbedder(url={shown_url(self.url)!r}, model={self.model_name!r})"

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def embed(self, texts: list[str], *, timeout_s: float | None = None) -> F32:
        """Embeddings of ``texts``, shape ``(len(texts), dim)`` float32, row ``i`` for ``texts[i]`` (as the endpoint gives them).

        ``timeout_s`` overrides the client's timeout for this call (seconds; a deadline's remainder).

        Raises:
            EmbedderError: the endpoint could not be reached, timed out, answered a non-2xx status,
                or answered something that is not one finite vector of one dimension per text.
        """
        if not texts:
            return np.zeros((0, self.dim or 0), dtype=np.float32)
        body: dict[str, Any] = {"model": self.model_name, "input": list(texts), "encoding_format": "float"}
        if self._dimensions is not None:
            body["dimensions"] = self._dimensions
        where = shown_url(self.url)
        t = self._timeout if timeout_s is None else max(0.001, min(timeout_s, self._timeout))
        try:
            r = self._client.post(self.url, json=body, timeout=httpx.Timeout(t))
        except httpx.TimeoutException:
            raise EmbedderError(f"embeddings endpoint {where} did not answer within {t:g} s") from None
        except httpx.HTTPError as e:
            raise EmbedderError(f"embeddings endpoint {where} unreachable: {type(e).__name__}: {_one_line(str(e))}") from None
        if not r.is_success:
            raise EmbedderError(f"embeddings endpoint {where} answered HTTP {r.status_code}: {_error_text(r)}")
        try:
            doc = r.json()
        except ValueError:
            raise EmbedderError(f"embeddings endpoint {where} answered HTTP {r.status_code} with a body that is not JSON") from None
        out = _vectors(doc, len(texts), where)
        self.dim = out.shape[1]
        return out


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= MAX_ERROR_CHARS else line[: MAX_ERROR_CHARS - 1] + "…"


def _error_text(r: httpx.Response) -> str:
    """The endpoint's own error message (OpenAI's ``{"error": {"message"}}``, or the body's start), one line."""
    try:
        doc = r.json()
    except ValueError:
        return _one_line(r.text) or "(empty body)"
    err = doc.get("error") if isinstance(doc, dict) else None
    if isinstance(err, dict) and isinstance(err.get("message"), str):
        return _one_line(err["message"])
    if isinstance(err, str):
        return _one_line(err)
    return _one_line(r.text)


def _vectors(doc: Any, n: int, where: str) -> F32:
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, list) or len(data) != n:
        got = len(data) if isinstance(data, list) else "no data list"
        raise EmbedderError(f"embeddings endpoint {where} answered {got} embeddings for {n} texts")
    rows: list[list[float] | None] = [None] * n
    for pos, item in enumerate(data):
        idx = item.get("index", pos) if isinstance(item, dict) else None
        vec = item.get("embedding") if isinstance(item, dict) else None
        if not isinstance(idx, int) or not 0 <= idx < n or rows[idx] is not None:
            raise EmbedderError(f"embeddings endpoint {where} answered a bad or repeated index {idx!r}")
        if not isinstance(vec, list) or not vec or not all(isinstance(x, int | float) and not isinstance(x, bool) for x in vec):
            raise EmbedderError(f"embeddings endpoint {where} answered an embedding that is not a list of numbers (a base64 one is not asked for)")
        rows[idx] = vec
    dims = {len(v) for v in rows if v is not None}
    if len(dims) != 1:
        raise EmbedderError(f"embeddings endpoint {where} answered vectors of several dimensions {sorted(dims)}")
    with np.errstate(over="ignore"):
        arr = np.asarray(rows, dtype=np.float64).astype(np.float32)
    if not np.isfinite(arr).all():
        raise EmbedderError(f"embeddings endpoint {where} answered a vector holding NaN, infinity or a value beyond float32")
    if not arr.any(axis=1).all():
        raise EmbedderError(f"embeddings endpoint {where} answered an all-zero vector")
    return arr
