"""Upstream compatibility: upstream's ``protocol.a2a`` package (docs/a2a.md)."""
