"""Upstream compatibility: re-exports upstream's ``app.tool.search.baidu_search`` from
:mod:`app.compat.tool.search.baidu_search`."""

from app.compat.tool.search.baidu_search import BaiduSearchEngine

__all__ = ["BaiduSearchEngine"]
