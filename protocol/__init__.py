"""Upstream compatibility: upstream's ``protocol`` package (the A2A server, docs/a2a.md)."""
