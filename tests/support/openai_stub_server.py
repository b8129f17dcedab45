"""A local HTTP server speaking OpenAI's chat-completions protocol, for extraction tests.

``POST {base_url}/chat/completions`` (``base_url`` is ``http://127.0.0.1:<port>/v1``) answers
with scripted replies, one per call, and records every request it receives, so a test can assert
on what left the process (redacted text, the model, the bearer header). Built on the standard
library's :class:`~http.server.ThreadingHTTPServer`, bound to 127.0.0.1 on a free port and served
from a daemon thread; use it as a context manager::

    with OpenAIStubServer([Reply.completion('{"experiences": []}')]) as server:
        client = ChatClient(server.base_url, "stub-model")
        ...
        assert server.requests[0].json()["model"] == "stub-model"

Replies come from a queue of :class:`Reply` objects (``(status, body)`` tuples are accepted too),
consumed in order, or from a callable ``(RecordedRequest) -> Reply`` called for every request.
When the queue is empty the server answers 500. Any other path or method gets 404.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

CHAT_PATH = "/v1/chat/completions"


def completion_body(content: str | None, *, model: str = "stub-model", refusal: str | None = None) -> bytes:
    """A chat-completions response body whose ``choices[0].message.content`` is ``content``."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if refusal is not None:
        message["refusal"] = refusal
    doc = {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": 1_793_613_600,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }
    return json.dumps(doc).encode()


@dataclass(frozen=True)
class Reply:
    """One scripted answer.

    Attributes:
        status: the HTTP status code.
        body: the response body bytes.
        delay_s: seconds to wait before answering (to provoke client timeouts); cut short when the
            server stops.
        content_type: the ``Content-Type`` header.
    """

    status: int
    body: bytes
    delay_s: float = 0.0
    content_type: str = "application/json"

    @classmethod
    def completion(cls, content: str | None, *, delay_s: float = 0.0) -> Reply:
        """A 200 chat completion whose message content is ``content``."""
        return cls(200, completion_body(content), delay_s=delay_s)

    @classmethod
    def items(cls, items: list[dict[str, Any]], *, wrap: bool = True) -> Reply:
        """A 200 chat completion whose content is ``{"experiences": items}`` (or the bare list)."""
        return cls.completion(json.dumps({"experiences": items} if wrap else items))


@dataclass(frozen=True)
class RecordedRequest:
    """A request the server received: method, path, headers (lower-cased names), raw body."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)


Script = Callable[[RecordedRequest], Reply]


@dataclass
class _State:
    replies: deque[Reply] = field(default_factory=deque)
    script: Script | None = None
    requests: list[RecordedRequest] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # do not wait for a handler still sleeping out a delay

    def __init__(self, state: _State) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.state = state

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet when a client hung up first (a timeout test does that on purpose)."""


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """No access log on stderr."""

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _send(self, reply: Reply) -> None:
        if reply.delay_s > 0 and self.server.state.stopping.wait(reply.delay_s):
            return
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        self.wfile.write(reply.body)

    def do_POST(self) -> None:
        body = self._read_body()
        if self.path != CHAT_PATH:
            self._send(Reply(404, b'{"error": {"message": "not found"}}'))
            return
        request = RecordedRequest("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body)
        state = self.server.state
        with state.lock:
            state.requests.append(request)
            script = state.script
            queued = state.replies.popleft() if script is None and state.replies else None
        if script is not None:
            self._send(script(request))
        else:
            self._send(queued or Reply(500, b'{"error": {"message": "no scripted reply left"}}'))

    def do_GET(self) -> None:
        self._send(Reply(404, b'{"error": {"message": "not found"}}'))


class OpenAIStubServer:
    """The stub server as a context manager (see the module docstring).

    Args:
        replies: the scripted answers, in order (``Reply`` or ``(status, body)``), or a callable
            producing the answer for each request.
    """

    def __init__(self, replies: Iterable[Reply | tuple[int, bytes]] | Script = ()) -> None:
        self._state = _State()
        if callable(replies):
            self._state.script = replies
        else:
            self._state.replies.extend(r if isinstance(r, Reply) else Reply(r[0], r[1]) for r in replies)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The TCP port the server listens on (only while running)."""
        if self._server is None:
            raise RuntimeError("server not started")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """The API root to give a client: ``http://127.0.0.1:<port>/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        """A copy of the requests received so far to the chat-completions path, in arrival order."""
        with self._state.lock:
            return list(self._state.requests)

    def push(self, *replies: Reply) -> None:
        """Queue more scripted replies."""
        with self._state.lock:
            self._state.replies.extend(replies)

    def start(self) -> OpenAIStubServer:
        """Bind and start serving in a daemon thread."""
        self._server = _Server(self._state)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="openai-stub", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, wake delayed handlers, close the socket."""
        self._state.stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> OpenAIStubServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
