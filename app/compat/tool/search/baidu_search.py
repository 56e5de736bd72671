"""Upstream compatibility: upstream's path of the Baidu engine (ours: ``search.baidu``)."""

from app.tool.search.baidu import BaiduSearchEngine

__all__ = ["BaiduSearchEngine"]
