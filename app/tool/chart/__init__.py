"""Charts for the data-analysis agent: ``spec`` (what a chart is), ``render`` (matplotlib,
imported only when drawing: the ``data`` extra) and ``tools``."""

from app.tool.chart.render import render_chart
from app.tool.chart.spec import ChartSpec, Table
from app.tool.chart.tools import DataVisualization, VisualizationPrepare

__all__ = ["ChartSpec", "DataVisualization", "Table", "VisualizationPrepare", "render_chart"]
