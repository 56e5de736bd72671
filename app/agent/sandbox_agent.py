"""Upstream compatibility: re-exports upstream's ``app.agent.sandbox_agent`` from
:mod:`app.compat.agent.sandbox_agent`."""

from app.compat.agent.sandbox_agent import SandboxManus

__all__ = ["SandboxManus"]
