"""Upstream compatibility: upstream's path of the Google engine (ours: ``search.google``)."""

from app.tool.search.google import GoogleSearchEngine

__all__ = ["GoogleSearchEngine"]
