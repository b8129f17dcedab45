"""The report in a real headless browser (Debian's chromium; ``.ci/run`` installs it, so this never
skips): every chart draws (Plotly laid it out, drew marks, and its box has coloured pixels), the
page throws nothing and makes no network request; an empty file shows "no data yet"."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from PIL import Image

from hivestream.report import CHARTS, write_report_files
from tests.support.headless import Browser, wait_for_charts
from tests.support.report_fixtures import full_projection


def coloured_pixels(png: bytes) -> int:
    """Pixels whose channels differ by more than 60 (chart marks; axes, grid and text are grey)."""
    rgb = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=np.int16)
    return int(((rgb.max(axis=2) - rgb.min(axis=2)) > 60).sum())


def test_every_chart_draws_offline(tmp_path: Path) -> None:
    frames, kb, stubs = full_projection(tmp_path)
    page = write_report_files(frames, kb, stubs, tmp_path / "report.html")
    url = page.resolve().as_uri()
    with Browser() as b:
        b.open(url)
        charts = wait_for_charts(b)
        plots = [c for c in charts if c["state"] == "plot"]
        assert len(plots) == len(CHARTS)
        for c in plots:
            assert c["laidOut"] and c["svgs"] > 0 and c["marks"] > 0, c
            assert c["width"] > 300 and c["height"] > 200, c
            png = b.screenshot({"x": c["x"], "y": c["y"], "width": c["width"], "height": c["height"]})
            assert coloured_pixels(png) > 300, f"{c['key']} looks blank"
        assert b.exceptions() == []
        assert b.requested_urls() == [url]  # the page itself, nothing else
        assert b.evaluate("document.querySelectorAll('section[data-chart=top-frames] tbody tr').length") > 0


def test_an_empty_file_shows_no_data_yet(tmp_path: Path) -> None:
    import duckdb

    empty = tmp_path / "empty.duckdb"
    duckdb.connect(str(empty)).close()
    page = write_report_files(empty, None, None, tmp_path / "empty.html")
    url = page.resolve().as_uri()
    with Browser() as b:
        b.open(url)
        charts = wait_for_charts(b)
        assert charts and all(c["state"] == "empty" and c["nodata"] for c in charts)
        assert b.evaluate("getComputedStyle(document.getElementById('no-data')).display") != "none"
        assert b.evaluate("document.querySelectorAll('.js-plotly-plot').length") == 0
        assert b.exceptions() == [] and b.requested_urls() == [url]
