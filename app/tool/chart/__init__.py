"""Charts for the data-analysis agent: tables from CSV or records, drawn with matplotlib.

``spec`` (what a chart is and how it is checked), ``render`` (drawing, off the event loop) and
``tools`` (the ``data_visualization`` and ``visualization_preparation`` tools). matplotlib is
imported only when a chart is drawn; it comes with the ``data`` extra.
"""

from app.tool.chart.render import render_chart
from app.tool.chart.spec import ChartSpec, Table
from app.tool.chart.tools import DataVisualization, VisualizationPrepare

__all__ = ["ChartSpec", "DataVisualization", "Table", "VisualizationPrepare", "render_chart"]
