"""A local stub of the Anthropic Messages API (``POST /v1/messages``, streaming and not) for running
the real Claude Code CLI for one turn without a network or a key. Every answer is the same short
text unless a test gives ``answer``: a function of the request body to the answer's content blocks
(``text`` and ``tool_use``; a ``tool_use`` block makes the stop reason ``tool_use``, so Claude Code
runs the tool and asks again with its result). Each request body is kept for the test to inspect."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

REPLY = "The stub model says: four."


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


Answer = Callable[[dict[str, Any]], list[dict[str, Any]]]
"""The content blocks to answer a request body with."""


def _blocks_sse(blocks: list[dict[str, Any]]) -> list[bytes]:
    """The streaming events of ``blocks``: each block's start, its one delta (text or the tool input as JSON), its stop."""
    out: list[bytes] = []
    for i, b in enumerate(blocks):
        if b["type"] == "tool_use":
            out.append(_sse("content_block_start", {"type": "content_block_start", "index": i,
                                                    "content_block": {"type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}}))
            out.append(_sse("content_block_delta", {"type": "content_block_delta", "index": i,
                                                    "delta": {"type": "input_json_delta", "partial_json": json.dumps(b["input"])}}))
        else:
            out.append(_sse("content_block_start", {"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}}))
            out.append(_sse("content_block_delta", {"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": b["text"]}}))
        out.append(_sse("content_block_stop", {"type": "content_block_stop", "index": i}))
    return out


class AnthropicStub:
    """Serve on a free loopback port in a daemon thread; ``requests`` holds the parsed bodies."""

    def __init__(self, answer: Answer | None = None) -> None:
        self.requests: list[dict[str, Any]] = []
        stub = self
        reply: Answer = answer or (lambda _body: [{"type": "text", "text": REPLY}])

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_a: object) -> None:
                return

            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(n) or b"{}")
                except ValueError:
                    body = {}
                path = self.path.split("?")[0]
                if path.endswith("/count_tokens"):
                    return self._json({"input_tokens": 10})
                if not path.endswith("/v1/messages"):
                    return self._json({"type": "error", "error": {"type": "not_found_error", "message": path}}, 404)
                stub.requests.append(body)
                model = body.get("model", "claude-stub")
                usage = {"input_tokens": 10, "output_tokens": 6}
                msg = {"id": f"msg_stub_{len(stub.requests)}", "type": "message", "role": "assistant", "model": model}
                blocks = reply(body)
                stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
                if not body.get("stream"):
                    return self._json({**msg, "content": blocks, "stop_reason": stop, "stop_sequence": None, "usage": usage})
                out = b"".join([
                    _sse("message_start", {"type": "message_start", "message": {**msg, "content": [], "stop_reason": None,
                                                                                "stop_sequence": None, "usage": {**usage, "output_tokens": 1}}}),
                    *_blocks_sse(blocks),
                    _sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                           "usage": {"output_tokens": 6}}),
                    _sse("message_stop", {"type": "message_stop"}),
                ])
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def _json(self, obj: dict[str, Any], status: int = 200) -> None:
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        """The base URL to give Claude Code as ``ANTHROPIC_BASE_URL``."""
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()
