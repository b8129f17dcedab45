"""Requests the HTTP parser cannot read, answered in one JSON line (aiohttp's own answer echoes them).

aiohttp answers a request line or header over its limits (8190 bytes), too many headers, or a
malformed request with a ``text/plain`` body that quotes the start of the offending line (a long
``Authorization`` header: the token) and logs it with a traceback. :func:`quiet_parse_errors`
makes a runner's connections answer those with ``{"error": "bad_request", "detail": ...}`` and one
log line naming the status and the parser's error class only; a handler's own uncaught exception
(500) is still logged with its traceback, and answered without one.
"""

from __future__ import annotations

import json
import logging
from http import HTTPStatus

from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

log = logging.getLogger("hivestream.http")


class _QuietHandler(RequestHandler):  # type: ignore[type-arg]
    __slots__ = ()

    def handle_error(self, request: BaseRequest, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        if request.writer.output_size > 0:
            raise ConnectionError("the answer had begun: no error answer can follow it")
        if status >= 500:
            self.log_exception("a request handler failed", exc_info=exc)
            body = {"error": "internal_error", "detail": "the server failed on this request"}
        else:
            log.info("refused a request the HTTP parser could not read (HTTP %d, %s)", status, type(exc).__name__ if exc else "no detail")
            body = {"error": "bad_request", "detail": f"{HTTPStatus(status).phrase}: a request line or header is malformed or over "
                                                      "8190 bytes, or there are too many headers"}
        resp = web.Response(status=status, text=json.dumps(body), content_type="application/json")
        resp.force_close()
        return resp


class _QuietServer(web.Server):  # type: ignore[misc]
    def __call__(self) -> RequestHandler:  # type: ignore[type-arg]
        handler = super().__call__()
        handler.__class__ = _QuietHandler
        return handler


def quiet_parse_errors(runner: web.AppRunner) -> None:
    """Make the connections ``runner`` accepts from now on answer unreadable requests as the module says.

    Call it after ``runner.setup()`` and before starting a site. Follows aiohttp 3's
    ``Server.__call__`` / ``RequestHandler.handle_error`` (the pinned major).

    Raises:
        RuntimeError: ``runner`` is not set up.
    """
    server = runner.server
    if server is None:
        raise RuntimeError("set the runner up first")
    server.__class__ = _QuietServer
