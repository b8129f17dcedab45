"""A small client of headless Chromium over the DevTools protocol (``websockets``), for the report tests.

It starts Debian's ``chromium`` with a fresh profile and no background networking, opens a page
with the Network domain enabled before navigation (so every request the page makes is recorded),
evaluates JavaScript and takes PNG screenshots. Used by ``tests/hivestream/test_report_browser.py`` and
``bench/report_screenshot.py``.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from websockets.sync.client import ClientConnection, connect

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run", "--no-default-browser-check", "--hide-scrollbars", "--mute-audio"]


def chromium_binary() -> str:
    """The Chromium executable (``chromium``, as Debian names it).

    Raises:
        FileNotFoundError: when none is installed (``.ci/run`` installs it).
    """
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    raise FileNotFoundError("no chromium on PATH: apt-get install -y chromium (.ci/run does it)")


class Browser:
    """Headless Chromium with one page; a context manager.

    Args:
        width, height: the window size in CSS pixels.
        timeout_s: how long to wait for the browser to start and for each reply.

    Raises:
        FileNotFoundError: no chromium; TimeoutError: it did not start.
    """

    def __init__(self, width: int = 1400, height: int = 1000, timeout_s: float = 60.0) -> None:
        self.timeout_s = timeout_s
        self.profile = Path(tempfile.mkdtemp(prefix="hivestream-chromium-"))
        self.proc = subprocess.Popen(
            [chromium_binary(), *CHROMIUM_FLAGS, f"--user-data-dir={self.profile}", "--remote-debugging-port=0",
             f"--window-size={width},{height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.events: list[dict[str, Any]] = []
        self._id = 0
        self._stack = ExitStack()
        self.ws = self._stack.enter_context(self._connect())
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
                  page=True)

    def _connect(self) -> ClientConnection:
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            if port_file.exists():
                lines = port_file.read_text().split("\n")
                if len(lines) >= 2 and lines[0].strip():
                    return connect(f"ws://127.0.0.1:{lines[0].strip()}{lines[1].strip()}", max_size=None, open_timeout=self.timeout_s)
            if self.proc.poll() is not None:
                raise RuntimeError(f"chromium exited with {self.proc.returncode}")
            time.sleep(0.05)
        raise TimeoutError("chromium did not start")

    def call(self, method: str, params: dict[str, Any] | None = None, *, page: bool = False) -> dict[str, Any]:
        """Send one DevTools command (to the page session when ``page``) and return its result.

        Events received meanwhile are appended to :attr:`events`.

        Raises:
            RuntimeError: the command failed; TimeoutError: no reply in time.
        """
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if page:
            msg["sessionId"] = self.session
        self.ws.send(json.dumps(msg))
        deadline = time.monotonic() + self.timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no reply to {method}")
            reply = json.loads(self.ws.recv(timeout=left))
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            if "method" in reply:
                self.events.append(reply)

    def open(self, url: str) -> None:
        """Enable Network and Page, then navigate to ``url`` and wait for its load event."""
        self.call("Network.enable", page=True)
        self.call("Runtime.enable", page=True)
        self.call("Page.enable", page=True)
        self.call("Page.navigate", {"url": url}, page=True)
        deadline = time.monotonic() + self.timeout_s
        while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not load")
            self.evaluate("1")

    def evaluate(self, expression: str) -> Any:
        """The JSON value of a JavaScript expression in the page (promises awaited).

        Raises:
            RuntimeError: the expression threw.
        """
        res = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True}, page=True)
        if "exceptionDetails" in res:
            raise RuntimeError(f"page error: {res['exceptionDetails'].get('text')} {res['exceptionDetails'].get('exception', {}).get('description')}")
        return res.get("result", {}).get("value")

    def requested_urls(self) -> list[str]:
        """Every URL the page requested so far (``Network.requestWillBeSent``), the page itself included."""
        return [e["params"]["request"]["url"] for e in self.events if e.get("method") == "Network.requestWillBeSent"]

    def exceptions(self) -> list[str]:
        """Uncaught JavaScript exceptions the page threw so far (``Runtime.exceptionThrown``)."""
        return [str(e["params"]["exceptionDetails"].get("exception", {}).get("description") or e["params"]["exceptionDetails"].get("text"))
                for e in self.events if e.get("method") == "Runtime.exceptionThrown"]

    def screenshot(self, clip: dict[str, float] | None = None) -> bytes:
        """A PNG of ``clip`` (x, y, width, height in CSS pixels of the page) or of the whole page."""
        if clip is None:
            size = self.call("Page.getLayoutMetrics", page=True)["cssContentSize"]
            clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"]}
        data = self.call("Page.captureScreenshot", {"format": "png", "clip": {**clip, "scale": 1}, "captureBeyondViewport": True}, page=True)
        return base64.b64decode(data["data"])

    def close(self) -> None:
        """Stop the browser and remove its profile."""
        try:
            self._stack.close()
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


CHART_STATE_JS = """
Array.from(document.querySelectorAll('section[data-chart]')).map(s => {
  const plot = s.querySelector('.js-plotly-plot');
  const r = (plot || s).getBoundingClientRect();
  return {key: s.dataset.chart, state: s.dataset.state, x: r.left + window.scrollX, y: r.top + window.scrollY, width: r.width,
          height: r.height, svgs: plot ? plot.querySelectorAll('.main-svg').length : 0,
          marks: plot ? plot.querySelectorAll('.trace, .point, .bars path, .funnel path').length : 0,
          laidOut: !!(plot && plot._fullLayout), nodata: !!s.querySelector('.nodata')};
})
"""
"""JavaScript returning, per report section, its state, the plot's box and how many marks Plotly drew."""


def wait_for_charts(browser: Browser, timeout_s: float = 30.0) -> list[dict[str, Any]]:
    """Poll until every ``plot`` section has been laid out with marks (or time runs out) and return the states."""
    deadline = time.monotonic() + timeout_s
    while True:
        states: list[dict[str, Any]] = browser.evaluate(CHART_STATE_JS)
        if all(s["laidOut"] and s["marks"] > 0 for s in states if s["state"] == "plot") or time.monotonic() > deadline:
            browser.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
            return states
        time.sleep(0.1)
