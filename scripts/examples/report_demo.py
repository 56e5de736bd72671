"""Demo: the data-analysis agent writes an HTML report with charts (needs an LLM config and the
``data`` extra). Run ``python scripts/examples/report_demo.py`` (upstream kept it at
``app/tool/chart_visualization/test/report_demo.py``)."""

from __future__ import annotations

import asyncio

from app.agent.data_analysis import DataAnalysis

REQUEST = """Analyse this table and write an HTML report with charts into the workspace.
Quarter | North | South | West
Q1 | 310 | 280 | 190
Q2 | 335 | 260 | 240
Q3 | 360 | 300 | 255
Q4 | 390 | 310 | 300"""


async def main() -> None:
    agent = DataAnalysis()
    try:
        await agent.run(REQUEST)
    finally:
        await agent.cleanup()


if __name__ == "__main__":
    asyncio.run(main())
