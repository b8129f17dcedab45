"""A local stub of the OpenAI Responses API (``POST /v1/responses``, streamed as server-sent
events) for running the real Codex CLI for one turn without a network or a key. Every answer is
one assistant message with the same text; request bodies are kept for the test."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

REPLY = "The stub model says: five."


class ResponsesStub:
    """Serve on a free loopback port in a daemon thread."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_a: object) -> None:
                return

            def do_GET(self) -> None:
                data = json.dumps({"object": "list", "data": [{"id": "stub-model", "object": "model"}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(n) or b"{}")
                except ValueError:
                    body = {}
                stub.requests.append(body)
                rid = f"resp_stub_{len(stub.requests)}"
                item = {"type": "message", "role": "assistant", "id": f"msg_{rid}", "status": "completed",
                        "content": [{"type": "output_text", "text": REPLY, "annotations": []}]}
                usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 6,
                         "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 16}
                events = [
                    ("response.created", {"type": "response.created", "response": {"id": rid}}),
                    ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": {**item, "content": []}}),
                    ("response.output_text.delta", {"type": "response.output_text.delta", "item_id": item["id"], "output_index": 0,
                                                    "content_index": 0, "delta": REPLY}),
                    ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}),
                    ("response.completed", {"type": "response.completed", "response": {"id": rid, "usage": usage, "output": [item]}}),
                ]
                out = b"".join(f"event: {e}\ndata: {json.dumps(d)}\n\n".encode() for e, d in events)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        """The provider base URL for Codex (``.../v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()
