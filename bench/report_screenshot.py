"""Write a PNG screenshot of the demo's report, for people to look at (``make report-screenshot``).

Runs ``hivestream demo`` into a temporary directory (the demo writes its report next to its DuckDB
file), opens the report in headless Chromium and captures the whole page.

Usage: ``python bench/report_screenshot.py [--out hivestream-demo-report.png] [--width 1400]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from typer.testing import CliRunner  # noqa: E402

from hivestream.cli.app import app  # noqa: E402
from tests.support.headless import Browser, wait_for_charts  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, default=Path("hivestream-demo-report.png"))
    ap.add_argument("--width", type=int, default=1400)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "hivestream-demo.duckdb"
        res = CliRunner().invoke(app, ["demo", "--db", str(db)])
        if res.exit_code != 0:
            raise SystemExit(f"hivestream demo failed: {res.output}")
        page = Path(tmp) / "hivestream-demo-report.html"
        with Browser(width=args.width) as b:
            b.open(page.resolve().as_uri())
            charts = wait_for_charts(b)
            png = b.screenshot()
            requests = b.requested_urls()
    args.out.write_bytes(png)
    drawn = sum(1 for c in charts if c["state"] == "plot" and c["marks"] > 0)
    print(f"wrote {args.out.resolve()} ({len(png) / 1e3:.0f} kB): {drawn} charts drawn, "
          f"{sum(1 for c in charts if c['state'] == 'empty')} sections with no data yet, {len(requests) - 1} network requests")


if __name__ == "__main__":
    main()
