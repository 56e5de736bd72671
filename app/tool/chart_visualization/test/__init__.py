"""Upstream's chart demos: ``python -m app.tool.chart_visualization.test.chart_demo``."""

__all__: list[str] = []
