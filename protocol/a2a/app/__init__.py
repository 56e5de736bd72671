"""Upstream compatibility: ``python -m protocol.a2a.app.main`` serves Manus over A2A; the
implementation is :mod:`app.a2a` (docs/a2a.md)."""
