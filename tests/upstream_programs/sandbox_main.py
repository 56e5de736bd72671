"""An upstream-style sandbox_main.py: SandboxManus.create(), run(prompt), cleanup()."""

import argparse
import asyncio

from app.agent.sandbox_agent import SandboxManus
from app.logger import logger


async def main():
    parser = argparse.ArgumentParser(description="SandboxManus with a prompt")
    parser.add_argument("--prompt", type=str, required=False)
    args = parser.parse_args()

    agent = await SandboxManus.create()
    try:
        prompt = args.prompt if args.prompt else input("Enter your prompt: ")  # noqa: ASYNC250 (as upstream)
        if not prompt.strip():
            logger.warning("Empty prompt provided.")
            return
        await agent.run(prompt)
        logger.info("Request processing completed.")
    finally:
        await agent.cleanup()


if __name__ == "__main__":
    asyncio.run(main())
