"""Drawing a chart into PNG and/or a self-contained HTML page, in memory (the tool saves it
through the one confined writer). matplotlib's object API, in a worker thread, behind a lock:
its font cache is not safe to build from two threads."""

from __future__ import annotations

import asyncio
import html
import importlib.util
import io
import itertools
import math
import re
import statistics
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.exceptions import ToolError
from app.tool.chart.spec import ChartSpec, Table

_DRAW_LOCK = threading.Lock()

_PHRASES = {
    "en": {
        "max": "{y}: highest {value} at {x}",
        "min": "{y}: lowest {value} at {x}",
        "mean": "{y}: average {value} over {n} values",
        "change": "{y}: from {first} to {last} ({pct})",
        "share": "{x} has the largest share of {y} ({pct})",
    },
    "zh": {
        "max": "{y}：最高值 {value}，出现在 {x}",
        "min": "{y}：最低值 {value}，出现在 {x}",
        "mean": "{y}：{n} 个数值的平均值为 {value}",
        "change": "{y}：从 {first} 变为 {last}（{pct}）",
        "share": "{x} 在 {y} 中占比最大（{pct}）",
    },
}


@dataclass
class ChartFiles:
    """What one chart produced: its encoded files (by suffix, not yet saved), the paths they
    were saved as (filled in by the caller) and, when asked, plain-text insights."""

    title: str
    chart_type: str
    outputs: dict[str, bytes] = field(default_factory=dict)
    paths: list[Path] = field(default_factory=list)
    insights: list[str] = field(default_factory=list)

    @property
    def stem(self) -> str:
        """The file name the outputs are saved under, without the suffix."""
        return chart_slug(self.title)


def matplotlib_available() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def chart_slug(title: str) -> str:
    """A file-name stem from a title (letters, digits, ``_`` and ``-`` only)."""
    slug = re.sub(r"[^\w\-]+", "_", title, flags=re.UNICODE).strip("_")
    return slug[:60] or "chart"


async def render_chart(
    spec: ChartSpec,
    table: Table,
    formats: tuple[str, ...] = ("png",),
    *,
    insights: bool = False,
    language: str = "en",
) -> ChartFiles:
    """Draw ``spec`` from ``table`` into one in-memory file per format (``png``, ``html``);
    ``ToolError`` on bad columns or chart types that do not fit the data."""
    if not matplotlib_available():
        raise ToolError(
            "Charts need matplotlib, which is not installed. Install the data extra: "
            "pip install -e '.[data]'"
        )
    return await asyncio.to_thread(_render_sync, spec, table, formats, insights, language)


def _render_sync(
    spec: ChartSpec,
    table: Table,
    formats: tuple[str, ...],
    want_insights: bool,
    language: str,
) -> ChartFiles:
    x, ys, kind = _plan(spec, table)
    result = ChartFiles(title=spec.title, chart_type=kind)
    if want_insights:
        result.insights = _insights(table, x, ys, kind, _PHRASES.get(language, _PHRASES["en"]))
    with _DRAW_LOCK:
        figure = _draw(spec.title, table, x, ys, kind)
        if "png" in formats:
            png = io.BytesIO()
            figure.savefig(png, format="png", dpi=110)
            result.outputs["png"] = png.getvalue()
        if "html" in formats:
            svg = io.StringIO()
            figure.savefig(svg, format="svg")
            page = _html_page(spec.title, svg.getvalue(), result.insights)
            result.outputs["html"] = page.encode("utf-8")
    return result


def _plan(spec: ChartSpec, table: Table) -> tuple[str, list[str], str]:
    """Check the columns and pick the chart type: ``(x, ys, type)``."""
    where = f"chart '{spec.title}'"
    columns = ", ".join(table.columns)
    x = spec.x or table.columns[0]
    for column in [x, *(spec.y or [])]:
        if column not in table.columns:
            raise ToolError(f"{where}: column '{column}' is not in the data (columns: {columns})")
    ys = spec.y or [c for c in table.columns if c != x and table.is_numeric(c)]
    if not ys:
        raise ToolError(
            f"{where}: no numeric column to plot against '{x}' (columns: {columns}); "
            "name the value columns in `y`"
        )
    for y in ys:
        table.numbers(y)  # raises a clear error for a non-numeric y column
    kind = spec.chart_type
    if kind == "auto":
        kind = "line" if table.is_numeric(x) and len(table.rows) > 2 else "bar"
    if kind == "scatter" and not table.is_numeric(x):
        raise ToolError(f"{where}: a scatter chart needs a numeric x column; '{x}' is not")
    if kind == "pie":
        if len(ys) != 1:
            raise ToolError(f"{where}: a pie chart shows one value column; give exactly one `y`")
        values = [v for v in table.numbers(ys[0]) if not math.isnan(v)]
        if any(v < 0 for v in values) or sum(values) <= 0:
            raise ToolError(f"{where}: a pie chart needs non-negative values with a positive sum")
    return x, ys, kind


def _draw(title: str, table: Table, x: str, ys: list[str], kind: str) -> Any:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(8, 4.5), layout="constrained")
    ax = figure.add_subplot()
    ax.set_title(title)
    labels = [str(v) for v in table.values(x)]
    if kind == "pie":
        ax.pie(table.numbers(ys[0]), labels=labels, autopct="%1.1f%%")
        ax.axis("equal")
        return figure
    if kind == "histogram":
        for y in ys:
            values = [v for v in table.numbers(y) if not math.isnan(v)]
            ax.hist(values, bins="auto", alpha=0.6 if len(ys) > 1 else 0.9, label=y)
        ax.set_xlabel(ys[0] if len(ys) == 1 else "value")
        ax.set_ylabel("count")
    else:
        numeric_x = table.is_numeric(x)
        positions: list[float] = (
            table.numbers(x) if numeric_x else [float(i) for i in range(len(labels))]
        )
        width = 0.8 * (_min_gap(positions) if numeric_x else 1.0) / len(ys)
        for i, y in enumerate(ys):
            values = table.numbers(y)
            if kind == "bar":
                offset = (i - (len(ys) - 1) / 2) * width
                ax.bar([p + offset for p in positions], values, width=width, label=y)
            elif kind == "scatter":
                ax.scatter(positions, values, label=y)
            else:
                marker = "o" if len(values) <= 40 else None
                ax.plot(positions, values, marker=marker, label=y)
                if kind == "area":
                    ax.fill_between(positions, values, alpha=0.3)
        if not numeric_x:
            step = max(1, len(labels) // 30)
            ax.set_xticks(
                positions[::step],
                labels[::step],
                rotation=45 if max(map(len, labels), default=0) > 6 else 0,
            )
        ax.set_xlabel(x)
        ax.set_ylabel(ys[0] if len(ys) == 1 else "")
        ax.grid(alpha=0.3)
    if len(ys) > 1:
        ax.legend()
    return figure


def _min_gap(positions: list[float]) -> float:
    ordered = sorted({p for p in positions if not math.isnan(p)})
    gaps = [b - a for a, b in itertools.pairwise(ordered) if b > a]
    return min(gaps) if gaps else 1.0


def _insights(table: Table, x: str, ys: list[str], kind: str, phrases: dict[str, str]) -> list[str]:
    labels = [str(v) for v in table.values(x)]
    found: list[str] = []
    for y in ys:
        points = [
            (label, v)
            for label, v in zip(labels, table.numbers(y), strict=True)
            if not math.isnan(v)
        ]
        if not points:
            continue
        values = [v for _, v in points]
        if kind == "pie":
            top = max(points, key=lambda p: p[1])
            found.append(phrases["share"].format(x=top[0], y=y, pct=f"{top[1] / sum(values):.1%}"))
            continue
        if kind == "histogram":
            found.append(
                phrases["mean"].format(y=y, value=_fmt(statistics.fmean(values)), n=len(values))
            )
            continue
        high = max(points, key=lambda p: p[1])
        low = min(points, key=lambda p: p[1])
        found.append(phrases["max"].format(y=y, value=_fmt(high[1]), x=high[0]))
        found.append(phrases["min"].format(y=y, value=_fmt(low[1]), x=low[0]))
        if kind in ("line", "area") and len(points) > 1:
            first, last = values[0], values[-1]
            pct = f"{(last - first) / abs(first):+.1%}" if first else "n/a"
            found.append(phrases["change"].format(y=y, first=_fmt(first), last=_fmt(last), pct=pct))
    return found


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if value == int(value) and abs(value) < 1e15 else f"{value:,.4g}"


def _html_page(title: str, svg: str, insights: list[str]) -> str:
    start = svg.find("<svg")
    body = svg[start:] if start >= 0 else svg
    notes = "".join(f"<li>{html.escape(item)}</li>" for item in insights)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title>"
        "<style>body{font-family:system-ui,sans-serif;max-width:960px;margin:2em auto;}"
        "svg{max-width:100%;height:auto;}</style></head>\n<body>"
        f"<h1>{html.escape(title)}</h1>\n{body}\n"
        + (f'<ul class="insights">{notes}</ul>\n' if notes else "")
        + "</body></html>\n"
    )
