"""Shared pieces of the batch tests: a 50-task set with its per-task scripts, an agent that
crashes, and a config pointing at the scripted server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from app.agent.toolcall import ToolCallAgent
from app.testing import Reply, Usage, call, error, slow, text, tool_calls

__all__ = ["ExplodingAgent", "comparable", "fifty_tasks", "write_tasks"]

USAGE = Usage(prompt_tokens=100, completion_tokens=10, total_tokens=110)


class ExplodingAgent(ToolCallAgent):
    """An agent with a bug: its step raises something that is not an LLM error."""

    name: str = "exploding"

    async def step(self) -> str:
        raise RuntimeError("agent bug: step exploded")


def fifty_tasks(tmp_path: Path) -> tuple[list[dict[str, Any]], dict[str, list[Reply]]]:
    """Tasks of every kind a batch meets, and the script each one follows."""
    data = tmp_path / "data.txt"
    data.write_text("payload 42\n")
    tasks: list[dict[str, Any]] = []
    scripts: dict[str, list[Reply]] = {}

    def add(task_id: str, script: list[Reply], **fields: Any) -> None:
        prompt = f"Task {task_id}: do the thing."
        tasks.append({"id": task_id, "prompt": prompt, **fields})
        scripts[prompt] = script

    for i in range(25):  # answered in plain text, correctly
        add(f"ok-{i:02d}", [text(str(i * 7), usage=USAGE)], agent="toolcall", expected=str(i * 7))
    for i in range(5):  # finished with terminate, wrong answer
        add(
            f"wrong-{i}",
            [tool_calls(call("terminate", {"status": "success"}), content="no idea", usage=USAGE)],
            agent="toolcall",
            expected="17",
        )
    for i in range(5):  # Manus with a file placed in its workspace, using real tools
        add(
            f"file-{i}",
            [
                tool_calls(call("bash", {"command": "cat input/data.txt > copy.txt"}), usage=USAGE),
                text("copied", usage=USAGE),
            ],
            files={"input/data.txt": str(data)},
        )
    for i in range(5):  # the endpoint rejects the key
        add(f"auth-{i}", [error(401, "bad key")], agent="toolcall")
    for i in range(4):  # runs out of steps
        # (an unknown tool: its error result lets the run go on; create_chat_completion
        # would end it with an answer)
        step = tool_calls(call("keep_going", {"step": "more"}), usage=USAGE)
        add(f"steps-{i}", [step, step], agent="toolcall", max_steps=2)
    for i in range(3):  # hangs far past its timeout
        add(f"hang-{i}", [slow(60, text("too late"))], agent="toolcall", timeout=1.5)
    for i in range(3):  # the agent itself crashes
        add(f"crash-{i}", [], agent="tests.batch_helpers:ExplodingAgent")
    assert len(tasks) == 50
    return tasks, scripts


def write_tasks(path: Path, tasks: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    return path


def comparable(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Results without their timings and session files (named per run), for comparing runs."""
    return {
        task_id: r.model_dump(exclude={"duration", "started_at", "session_file"})
        for task_id, r in results.items()
    }
