"""Upstream compatibility: re-exports upstream's ``app.tool.crawl4ai`` from
:mod:`app.compat.tool.crawl4ai`."""

from app.compat.tool.crawl4ai import Crawl4aiTool

__all__ = ["Crawl4aiTool"]
