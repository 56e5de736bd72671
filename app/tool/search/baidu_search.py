"""Upstream's module path for the Baidu engine (ours: :mod:`app.tool.search.baidu`)."""

from app.tool.search.baidu import BaiduSearchEngine

__all__ = ["BaiduSearchEngine"]
