"""A local HTTP server speaking OpenAI's embeddings protocol, for the stub embedder tests.

``POST /v1/embeddings`` answers ``{"data": [{"index", "embedding"}], "model"}`` with bag-of-words
vectors (each lower-cased word adds 1 to one of ``dim`` buckets chosen by its CRC-32), so texts that
share words are similar and the vectors are the same on every run. The items are answered in
reverse order, as the protocol allows (the client must put them back by ``index``). Every request
is recorded (path, headers, JSON body). ``fault`` replaces the answer: ``(status, body bytes)``;
``delay_s`` holds each answer back. Standard library only, bound to 127.0.0.1 on a free port,
served from a daemon thread; use it as a context manager.
"""

from __future__ import annotations

import json
import re
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import numpy.typing as npt


def bag_of_words(text: str, dim: int) -> list[float]:
    """The fake's vector of ``text``: ``dim`` word-count buckets (a text without words gets bucket 0 set)."""
    vec = [0.0] * dim
    for w in re.findall(r"[a-z0-9]+", text.lower()):
        vec[zlib.crc32(w.encode()) % dim] += 1.0
    if not any(vec):
        vec[0] = 1.0
    return vec


class BowEmbedder:
    """The fake endpoint's vectors in process (model ``fake-bow``): ``delay_s`` before each call, ``fail`` raises; ``calls`` counted."""

    model_name = "fake-bow"

    def __init__(self, dim: int = 64, *, delay_s: float = 0.0, fail: bool = False) -> None:
        self.dim, self.delay_s, self.fail, self.calls = dim, delay_s, fail, 0

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """One bag-of-words vector per text, shape ``(len(texts), dim)``."""
        self.calls += 1
        if self.delay_s:
            time.sleep(self.delay_s)
        if self.fail:
            raise RuntimeError("endpoint down")
        return np.asarray([bag_of_words(t, self.dim) for t in texts], dtype=np.float32)


class EmbeddingsFake:
    """The fake endpoint: ``base_url`` (``http://127.0.0.1:PORT/v1``), ``requests`` (dicts of path, headers, body)."""

    def __init__(self, dim: int = 64, *, fault: tuple[int, bytes] | None = None, delay_s: float = 0.0) -> None:
        self.dim = dim
        self.fault = fault
        self.delay_s = delay_s
        self.requests: list[dict[str, Any]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                fake.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                if fake.delay_s:
                    time.sleep(fake.delay_s)
                if self.path != "/v1/embeddings":
                    status, out = 404, b'{"error": {"message": "no such path"}}'
                elif fake.fault is not None:
                    status, out = fake.fault
                else:
                    texts = body["input"] if isinstance(body, dict) else []
                    data = [{"object": "embedding", "index": i, "embedding": bag_of_words(t, fake.dim)} for i, t in enumerate(texts)]
                    status, out = 200, json.dumps({"object": "list", "data": data[::-1], "model": body.get("model")}).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(out)))
                    self.end_headers()
                    self.wfile.write(out)
                except OSError:
                    pass  # the client gave up (a timeout test)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> EmbeddingsFake:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
