"""Upstream compatibility: everything that exists only so that code written for upstream
OpenManus runs unchanged, organized like upstream (``app.compat.sandbox.core.terminal`` is
upstream's ``app.sandbox.core.terminal``). Upstream's own import paths are short re-exports
of these modules; the core never imports this package (import-linter checks it:
docs/architecture.md#compatibility-layer)."""

__all__: list[str] = []
