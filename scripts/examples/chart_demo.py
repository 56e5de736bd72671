"""Demo: the data-analysis agent draws a chart for each task in ``tasks`` (needs an LLM config
and the ``data`` extra). Run ``python scripts/examples/chart_demo.py`` (upstream kept it at
``app/tool/chart_visualization/test/chart_demo.py``)."""

from __future__ import annotations

import asyncio

from app.agent.data_analysis import DataAnalysis
from app.logger import logger

prefix = "Draw a chart for the data below and save it in the workspace."
tasks: list[dict[str, str]] = [
    {
        "prompt": "Monthly rainfall per city, one line per city",
        "data": "Month,Oslo,Lima\nJan,49,1\nFeb,36,1\nMar,47,1\nApr,41,1",
    },
    {
        "prompt": "Share of each fruit in the basket",
        "data": "Fruit,Count\nApple,12\nPear,7\nPlum,4",
    },
]


async def main() -> None:
    for index, item in enumerate(tasks, 1):
        logger.info("Chart task {} of {}: {}", index, len(tasks), item["prompt"])
        agent = DataAnalysis()
        try:
            await agent.run(f"{prefix}\nChart: {item['prompt']}\nData:\n{item['data']}")
        finally:
            await agent.cleanup()


if __name__ == "__main__":
    asyncio.run(main())
