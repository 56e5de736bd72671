"""OpenManus-py: a faithful, sturdier re-implementation of the OpenManus agent framework.

Importing the package has no side effects: no config is read, no client built, no log file
opened. Heavy dependencies (openai, tiktoken encodings, mcp, browser-use) load on first use.
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
