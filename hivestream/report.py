"""``hivestream report``: one self-contained HTML file of charts over projection files.

Plotly draws the charts; its JavaScript bundle is inlined once in the page (no CDN, no MathJax,
no fonts or images fetched), so the file opens offline and makes no network request. A chart
without data shows "no data yet" and what would fill it. The data come from
:mod:`projections.frames.report_data` (small aggregated tables), so the page stays the same size
whatever the number of events.
"""

from __future__ import annotations

import contextlib
import html
import math
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import duckdb
import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from projections.experiences import report_data as kb_rd
from projections.frames import report_data as rd
from projections.frames.analytics import configured_window_ms, window_label

_CONFIG = {"displaylogo": False, "responsive": True, "displayModeBar": False}
_PALETTE = ["#3b6ea8", "#e07b39", "#4a9a5b", "#b8474a", "#7d62a8", "#8c6d52", "#d17ab8", "#7f7f7f", "#b5b33f", "#3fb2c2"]


@dataclass
class Chart:
    """One section of the report: a figure, or ``None`` with the reason there is no data yet."""

    key: str
    title: str
    note: str
    figure: go.Figure | None
    empty_hint: str = ""


@dataclass
class Sources:
    """The open read-only connections a report reads, and where each answer came from."""

    frames: duckdb.DuckDBPyConnection
    kb: duckdb.DuckDBPyConnection
    stubs: duckdb.DuckDBPyConnection
    freshness: list[str]


def _layout(fig: go.Figure, *, x: str = "", y: str = "", barmode: str | None = None) -> go.Figure:
    fig.update_layout(template="plotly_white", height=340, margin={"l": 60, "r": 20, "t": 20, "b": 50}, colorway=_PALETTE,
                      legend={"orientation": "h", "y": -0.2}, font={"family": "system-ui, sans-serif", "size": 12})
    if barmode:
        fig.update_layout(barmode=barmode)
    fig.update_xaxes(title_text=x)
    fig.update_yaxes(title_text=y)
    if x.startswith("day"):
        fig.update_xaxes(type="category")  # one bar per UTC day, no time-of-day ticks
    return fig


def _series(rows: list[tuple[object, ...]], x: int, name: int, y: int) -> dict[str, tuple[list[object], list[object]]]:
    out: dict[str, tuple[list[object], list[object]]] = defaultdict(lambda: ([], []))
    for r in rows:
        out[str(r[name])][0].append(r[x])
        out[str(r[name])][1].append(r[y])
    return dict(out)


def captures_chart(src: Sources) -> Chart:
    """Captures per UTC day per source (stacked bars)."""
    _, rows = rd.captures_per_day(src.frames)
    fig = None
    if rows:
        fig = go.Figure([go.Bar(x=xs, y=ys, name=s) for s, (xs, ys) in _series(rows, 0, 1, 2).items()])
        _layout(fig, x="day (UTC)", y="captures", barmode="stack")
    return Chart("captures-per-day", "Captures per day per source", "every capture of a turn, by the runtime that captured it", fig,
                 "run `hivestream run FILES --db FILE` or the projector")


def dup_share_chart(src: Sources) -> Chart:
    """Duplicate share over time per source pair (lines)."""
    _, rows = rd.duplicate_share_per_pair(src.frames)
    fig = None
    if rows:
        fig = go.Figure([go.Scatter(x=xs, y=ys, name=p, mode="lines+markers") for p, (xs, ys) in _series(rows, 0, 1, 2).items()])
        _layout(fig, x="day (UTC)", y="share of B's captures").update_yaxes(tickformat=".0%", rangemode="tozero")
    return Chart("duplicate-share", "Duplicate share over time per source pair",
                 "A → B: B's captures that were duplicates of a frame A wrote first, as a share of B's captures that day", fig,
                 "needs duplicates: the same turn captured by two sources")


_LAG_TICKS = [(0, "1 ms"), (1, "10 ms"), (2, "100 ms"), (3, "1 s"), (4, "10 s"), (5, "100 s"), (6, "17 min"), (7, "2.8 h"), (8, "28 h")]


def lag_chart(src: Sources) -> Chart:
    """Distribution of capture lags (log-binned) with the configured W marked."""
    _, rows = rd.lag_histogram(src.frames)
    _, summary = rd.lag_summary(src.frames)
    w = configured_window_ms(src.frames)
    fig = None
    if rows:
        fig = go.Figure([go.Bar(x=[float(v) + 0.125 for v in xs], y=ys, name=p, width=0.24)  # type: ignore[arg-type]
                         for p, (xs, ys) in _series(rows, 0, 1, 2).items()])
        _layout(fig, x="lag from the frame's first capture (log scale)", y="duplicates", barmode="stack")
        top = max([float(r[0]) for r in rows] + ([math.log10(w)] if w else []))  # type: ignore[arg-type]
        fig.update_xaxes(tickvals=[t for t, _ in _LAG_TICKS], ticktext=[s for _, s in _LAG_TICKS], range=[-0.3, top + 0.6])
        if w:
            fig.add_vline(x=math.log10(w), line_dash="dash", line_color="#b8474a",
                          annotation_text=f"W = {window_label(w)}", annotation_position="top left")
    note = "; ".join(f"{a} → {b}: p50 {p50} ms, p95 {p95} ms, max {mx} ms" for a, b, _n, p50, p95, mx in summary[:3])
    return Chart("capture-lag", f"Capture lag distribution (W = {window_label(w) if w is not None else 'unknown'})",
                 note or "lag = |duplicate's time − frame's first capture time|", fig, "needs duplicates")


def whatif_chart(src: Sources) -> Chart:
    """Frames and duplicates for several W values, the file's own W marked."""
    _, rows = rd.whatif(src.frames)
    fig = None
    if rows:
        labels = [str(r[0]) for r in rows]
        fig = go.Figure([go.Scatter(x=labels, y=[r[3] for r in rows], name="frames", mode="lines+markers"),
                         go.Scatter(x=labels, y=[r[4] for r in rows], name="duplicates collapsed", mode="lines+markers")])
        _layout(fig, x="window W", y="count")
        for r in rows:
            if r[5]:
                fig.add_annotation(x=str(r[0]), y=r[3], text=f"this file: {r[3]} frames", showarrow=True, arrowhead=2, ay=-40)
    return Chart("window-whatif", "Window what-if", "frames and duplicates if the captures were deduplicated with another W", fig,
                 "needs captures")


def one_sided_chart(src: Sources) -> Chart:
    """One-sided turns per day (bars per capturing source and missing side)."""
    _, rows = rd.one_sided_per_day(src.frames)
    fig = None
    if rows:
        series = _series([(r[0], f"{r[1]} (no {r[2]} capture)", r[3]) for r in rows], 0, 1, 2)
        fig = go.Figure([go.Bar(x=xs, y=ys, name=n) for n, (xs, ys) in series.items()])
        _layout(fig, x="day (UTC)", y="turns", barmode="stack")
    return Chart("one-sided-turns", "One-sided turns per day",
                 "prompts or replies only one side captured in a session where both sides normally do: a broken or missing hook", fig,
                 "none found: every turn of a paired gateway/backend session was captured by both sides")


def memory_chart(src: Sources) -> Chart:
    """Memory tool reads vs writes per day."""
    _, rows = rd.memory_per_day(src.frames)
    fig = None
    if rows:
        fig = go.Figure([go.Bar(x=xs, y=ys, name=f"{op}s") for op, (xs, ys) in _series(rows, 0, 1, 2).items()])
        _layout(fig, x="day (UTC)", y="memory tool calls", barmode="group")
    errs = sum(int(r[3]) for r in rows)  # type: ignore[call-overload]
    empty = sum(int(r[4]) for r in rows)  # type: ignore[call-overload]
    return Chart("memory-reads-writes", "Memory reads vs writes per day",
                 f"calls to memory tools (hive-mind, KnowHub, mem0, Letta, …): {empty} reads returned nothing, {errs} calls failed",
                 fig, "no memory tool calls in the hook events yet")


def stub_hit_chart(src: Sources) -> Chart:
    """Stub hit rate per channel."""
    _, rows = rd.stub_hit_rate(src.stubs)
    fig = None
    if rows:
        fig = go.Figure([go.Bar(x=[r[0] for r in rows], y=[r[3] for r in rows], text=[f"{r[2]}/{r[1]}" for r in rows],
                                name="hit rate", marker_color=_PALETTE[2])])
        _layout(fig, x="channel", y="messages with a match").update_yaxes(tickformat=".0%", range=[0, 1])
    return Chart("stub-hit-rate", "Stub hit rate per channel", "main-runtime messages that injected at least one stub", fig,
                 "give --stubs-db FILE (from `hivestream stubs run`)")


def stub_similarity_chart(src: Sources) -> Chart:
    """Best similarity per message around the threshold."""
    _, rows = rd.stub_similarity(src.stubs)
    thr = rd.stub_threshold(src.stubs)
    fig = None
    if rows:
        series = _series([(r[0], "matched" if r[1] else "not matched", r[2]) for r in rows], 0, 1, 2)
        fig = go.Figure([go.Bar(x=[float(v) + 0.01 for v in xs], y=ys, name=n, width=0.018) for n, (xs, ys) in series.items()])  # type: ignore[arg-type]
        _layout(fig, x="best stub similarity of the message (0.02 bins)", y="messages", barmode="stack")
        if thr is not None:
            fig.add_vline(x=thr, line_dash="dash", line_color="#b8474a", annotation_text=f"threshold {thr:g}")
    return Chart("stub-similarity", "Similarity distribution around the threshold", "how close the best stub came, per message", fig,
                 "give --stubs-db FILE (from `hivestream stubs run`)")


def kb_chart(src: Sources) -> Chart:
    """The KnowHub funnel."""
    _, rows = rd.kb_funnel(src.kb)
    fig = None
    if rows:
        fig = go.Figure(go.Funnel(y=[r[0] for r in rows], x=[r[1] for r in rows], textinfo="value", marker={"color": _PALETTE[:5]},
                                  connector={"visible": False}))
        _layout(fig)
    return Chart("kb-funnel", "KnowHub funnel", "submissions, then experiences by status", fig, "give --kb-db FILE (from `hivestream kb run`)")


def dead_letter_chart(src: Sources) -> Chart:
    """Dead letters per reason and pipeline (horizontal bars)."""
    _, rows = rd.dead_letters([("frames", src.frames), ("kb", src.kb), ("stubs", src.stubs)])
    fig = None
    if rows:
        series = _series([(r[1], r[0], r[2]) for r in rows], 0, 1, 2)
        fig = go.Figure([go.Bar(y=xs, x=ys, name=p, orientation="h") for p, (xs, ys) in series.items()])
        _layout(fig, x="records", y="", barmode="stack").update_yaxes(autorange="reversed")
    return Chart("dead-letters", "Dead letters per reason", "rejected input, never silently dropped", fig, "no input was rejected")


CHARTS: list[Callable[[Sources], Chart]] = [captures_chart, dup_share_chart, lag_chart, whatif_chart, one_sided_chart, memory_chart,
                                           stub_hit_chart, stub_similarity_chart, kb_chart, dead_letter_chart]
"""Every chart of the report, in page order."""


def _table_html(cols: list[str], rows: list[tuple[object, ...]]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{html.escape('' if v is None else str(v))}</td>" for v in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


_CSS = """
body{font-family:system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1d2733}
header{background:#1d2733;color:#fff;padding:18px 28px}header h1{margin:0;font-size:22px}header p{margin:4px 0 0;color:#c9d2dc;font-size:13px}
main{display:grid;grid-template-columns:repeat(auto-fill,minmax(560px,1fr));gap:18px;padding:18px 28px}
section{background:#fff;border:1px solid #dde2e8;border-radius:8px;padding:14px 16px}
section h2{font-size:16px;margin:0 0 2px}section p.note{font-size:12px;color:#56626f;margin:0 0 8px}
.nodata{height:200px;display:flex;flex-direction:column;align-items:center;justify-content:center;color:#56626f;background:#f1f3f6;border-radius:6px}
.nodata b{font-size:18px;color:#1d2733}.banner{margin:18px 28px 0;padding:12px 16px;background:#fff5d6;border:1px solid #e8d48a;border-radius:8px}
section.wide{grid-column:1/-1}table{border-collapse:collapse;width:100%;font-size:12px}
th,td{text-align:left;padding:4px 6px;border-bottom:1px solid #e5e9ee;vertical-align:top}th{background:#f1f3f6}
.kpis{display:flex;gap:26px;margin-top:10px}.kpis div{font-size:12px;color:#c9d2dc}.kpis b{display:block;font-size:20px;color:#fff}
"""


def _memory_use_html(src: Sources) -> str:
    """The section of what agents got back: searches and recalls per agent, zero-hit rates, time to approval, reminder conversion."""
    ucols, urows = kb_rd.memory_use(src.kb)
    kcols, krows = kb_rd.memory_kpis(src.kb)
    inner = (_table_html(ucols, urows) if urows else "") + (_table_html(kcols, krows) if krows else "")
    if not inner:
        inner = '<div class="nodata"><b>no data yet</b><span>no agent searched, recalled or submitted through hivestream</span></div>'
    return (f'<section class="wide" data-chart="memory-use" data-state="{"table" if urows or krows else "empty"}">'
            f'<h2>Memory back to the agents</h2><p class="note">searches and recalls per agent, the share that found nothing, '
            f"time from submission to approval, reminder conversion</p>{inner}</section>")


def render_html(src: Sources, *, generated_at_ms: int) -> str:
    """The whole report page.

    Args:
        src: the open connections.
        generated_at_ms: the time stamped in the page (epoch ms, injected).

    Raises:
        duckdb.Error: when a file holds tables of an unexpected shape.
    """
    charts = [build(src) for build in CHARTS]
    cols, trows = rd.totals(src.frames)
    kpis = dict(zip(cols, trows[0], strict=True)) if trows else {}
    has_data = any(c.figure is not None for c in charts)
    parts: list[str] = []
    for c in charts:
        if c.figure is None:
            inner = f'<div class="nodata"><b>no data yet</b><span>{html.escape(c.empty_hint)}</span></div>'
            state = "empty"
        else:
            inner = c.figure.to_html(full_html=False, include_plotlyjs=False, include_mathjax=False, div_id=f"chart-{c.key}", config=_CONFIG)
            state = "plot"
        parts.append(f'<section data-chart="{c.key}" data-state="{state}"><h2>{html.escape(c.title)}</h2>'
                     f'<p class="note">{html.escape(c.note)}</p>{inner}</section>')
    tcols, trows2 = rd.top_frames(src.frames)
    top = _table_html(tcols, trows2) if trows2 else '<div class="nodata"><b>no data yet</b><span>no frames</span></div>'
    parts.append(f'<section class="wide" data-chart="top-frames" data-state="{"table" if trows2 else "empty"}">'
                 f'<h2>Top frames</h2><p class="note">the 20 frames with the highest access_count</p>{top}</section>')
    parts.append(_memory_use_html(src))
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(generated_at_ms / 1000))
    kpi_html = "".join(f"<div><b>{html.escape(str(v))}</b>{html.escape(k.replace('_', ' '))}</div>" for k, v in kpis.items())
    banner = "" if has_data else ('<div class="banner" id="no-data"><b>no data yet</b>: '
                                  'the projection files hold no captures, memory calls, stubs or experiences.</div>')
    sources = "".join(f"<p>{html.escape(s)}</p>" for s in src.freshness)
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>hivestream report</title>'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{_CSS}</style>'
            f"<script>{get_plotlyjs()}</script></head><body>"
            f'<header><h1>hivestream memory report</h1><p>generated {stamp}</p>{sources}<div class="kpis">{kpi_html}</div></header>'
            f"{banner}<main>{''.join(parts)}</main></body></html>")


def write_report(src: Sources, out: Path, *, generated_at_ms: int) -> Path:
    """Write the page to ``out`` atomically (a temporary file renamed over it) and return ``out``.

    Raises:
        OSError: when the file cannot be written; duckdb.Error: see :func:`render_html`.
    """
    page = render_html(src, generated_at_ms=generated_at_ms)
    tmp = out.with_name(out.name + ".tmp")
    try:
        tmp.write_text(page, encoding="utf-8")
        tmp.replace(out)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise
    return out


def write_report_files(db: Path, kb_db: Path | None, stubs_db: Path | None, out_path: Path, notes: list[str] | None = None) -> Path:
    """Open the projection files read-only (or their snapshots) and write the report to ``out_path``
    (``notes``: lines shown before the freshness of each file).

    Raises:
        FileNotFoundError: a file (and its snapshot) is missing; duckdb.Error, OSError.
    """
    from projections.reading import open_for_reading
    from streams.model.clock import wall_clock_ms

    opened: list[duckdb.DuckDBPyConnection] = []
    fresh: list[str] = list(notes or [])
    try:
        for path in (db, kb_db, stubs_db):
            if path is not None:
                con, note = open_for_reading(path)
                opened.append(con)
                fresh.append(note)
        main = opened[0]
        kb = opened[1] if kb_db is not None else main
        stubs = opened[-1] if stubs_db is not None else main
        return write_report(Sources(main, kb, stubs, fresh), out_path, generated_at_ms=wall_clock_ms())
    finally:
        for con in opened:
            con.close()
