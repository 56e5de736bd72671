"""Upstream's module path for the Google engine (ours: :mod:`app.tool.search.google`)."""

from app.tool.search.google import GoogleSearchEngine

__all__ = ["GoogleSearchEngine"]
