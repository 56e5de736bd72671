"""An upstream-style run_flow.py: Manus() built directly, a planning flow from FlowFactory."""

import asyncio
import time

from app.agent.data_analysis import DataAnalysis
from app.agent.manus import Manus
from app.config import config
from app.flow.flow_factory import FlowFactory, FlowType
from app.logger import logger


async def run_flow():
    agents = {"manus": Manus()}
    if config.run_flow_config.use_data_analysis_agent:
        agents["data_analysis"] = DataAnalysis()
    try:
        prompt = input("Enter your prompt: ")  # noqa: ASYNC250 (as upstream)
        if prompt.strip().isspace() or not prompt:
            logger.warning("Empty prompt provided.")
            return
        flow = FlowFactory.create_flow(flow_type=FlowType.PLANNING, agents=agents)
        logger.warning("Processing your request...")
        try:
            started = time.time()
            result = await asyncio.wait_for(flow.execute(prompt), timeout=3600)
            logger.info(f"Request processed in {time.time() - started:.2f} seconds")
            logger.info(result)
            print("FLOW RESULT:", result)
        except TimeoutError:
            logger.error("Request processing timed out after 1 hour")
    except KeyboardInterrupt:
        logger.info("Operation cancelled by user.")
    except Exception as e:
        logger.error(f"Error: {e}")


if __name__ == "__main__":
    asyncio.run(run_flow())
