"""The batch's parts on their own: results file, scoring, rate schedule, keyed scripts."""

from __future__ import annotations

import asyncio
import json

import pytest

from app.agent.toolcall import ToolCallAgent
from app.batch.jsonl import BatchInputError, ResultLog, load_tasks, read_results
from app.batch.models import TaskResult
from app.batch.ratelimit import RateSchedule
from app.batch.scoring import answers_match
from app.config import LLMSettings
from app.llm import LLM
from app.testing import KeyedScripts, ScriptedLLMServer, text
from app.testing.wire import CapturedRequest


def result(task_id: str, status: str = "done") -> TaskResult:
    state = "FINISHED" if status == "done" else "ERROR"
    return TaskResult(id=task_id, status=status, state=state)


def test_torn_last_line_is_dropped_and_appends_start_clean(tmp_path):
    path = tmp_path / "out.jsonl"
    path.write_text(result("a").model_dump_json() + "\n" + '{"id": "b", "sta')
    with ResultLog(path) as log:
        assert set(log.results) == {"a"}
        log.append(result("c"))
    lines = path.read_text().splitlines()
    assert [json.loads(line)["id"] for line in lines] == ["a", "c"]


def test_a_later_line_supersedes_and_a_second_writer_is_refused(tmp_path):
    path = tmp_path / "out.jsonl"
    with ResultLog(path) as log:
        log.append(result("a", "failed"))
        log.append(result("a", "done"))
        with pytest.raises(BatchInputError, match="another batch is writing"):
            ResultLog(path).open()
    assert read_results(path)["a"].status == "done"


def test_foreign_results_file_is_refused(tmp_path):
    path = tmp_path / "out.jsonl"
    path.write_text('{"something": "else"}\n')
    with pytest.raises(BatchInputError, match="line 1: not a batch result"):
        read_results(path)


def test_tasks_file_fields(tmp_path):
    (tmp_path / "sub").mkdir()
    path = tmp_path / "sub" / "tasks.jsonl"
    path.write_text(
        '# comment\n\n{"id": 7, "prompt": "p", "files": ["a/b.txt"], "expected": 3.5}\n'
    )
    [task] = load_tasks(path)
    assert task.id == "7" and task.expected == "3.5"
    assert task.files == {"b.txt": str(tmp_path / "sub" / "a" / "b.txt")}
    path.write_text('{"id": "x", "prompt": "  ", "bogus": 1}\n')
    with pytest.raises(BatchInputError) as info:
        load_tasks(path)
    assert "prompt: Value error, prompt is blank" in str(info.value)
    assert "bogus: Extra inputs are not permitted" in str(info.value)


@pytest.mark.parametrize(
    ("answer", "expected", "mode", "ok"),
    [
        ("  Paris. ", "paris", "exact", True),
        ("$1,000", "1000", "exact", True),
        ("1000.5", "1000", "exact", False),
        ("a, B ;c", "a,b,c", "exact", True),
        ("a, b", "a,b,c", "exact", False),
        ("The answer is Paris.", "Paris", "exact", False),
        ("The answer is Paris.", "Paris", "contains", True),
        (None, "x", "exact", False),
    ],
)
def test_answers_match(answer, expected, mode, ok):
    assert answers_match(answer, expected, mode) is ok


def test_rate_schedule_spreads_requests_after_a_burst():
    now = [100.0]
    schedule = RateSchedule(60, burst=3, clock=lambda: now[0])  # one per second
    assert [schedule.reserve() for _ in range(5)] == [0.0, 0.0, 0.0, 1.0, 2.0]
    now[0] += 10  # a quiet spell refills the burst
    assert [schedule.reserve() for _ in range(4)] == [0.0, 0.0, 0.0, 1.0]
    with pytest.raises(ValueError):
        RateSchedule(0)


def _request(*messages: dict[str, str], headers: dict[str, str] | None = None):
    body = {"messages": list(messages)}
    return CapturedRequest(
        index=0,
        method="POST",
        path="/v1/chat/completions",
        query={},
        headers=headers or {},
        body=body,
        raw=b"",
        route="chat",
    )


def test_keyed_scripts_by_turn_by_order_and_by_header():
    user = {"role": "user", "content": "Task A"}
    assistant = {"role": "assistant", "content": "..."}
    by_turn = KeyedScripts({"Task A": ["one", "two"]})
    assert by_turn(_request(user)).content == "one"
    assert by_turn(_request(user)).content == "one"  # same turn, same reply
    assert by_turn(_request(user, assistant)).content == "two"
    assert by_turn(_request(user, assistant, assistant)).status == 400
    wrapped = {"role": "user", "content": "Plan step 1 of: Task A (do it)"}
    assert by_turn(_request(wrapped)).content == "one"  # found inside a wrapper prompt
    assert by_turn(_request({"role": "user", "content": "Task B"})).status == 400

    by_order = KeyedScripts({"Task A": ["one", "two"]}, by="order")
    assert [by_order(_request(user)).content for _ in range(2)] == ["one", "two"]
    by_header = KeyedScripts({"t1": ["h"]}, key="header:X-Task")
    assert by_header(_request(user, headers={"x-task": "t1"})).content == "h"


async def test_keyed_server_serves_concurrent_agents():
    scripts = {f"Task {i}": [text(f"answer {i}")] for i in range(20)}
    with ScriptedLLMServer(responder=KeyedScripts(scripts)) as server:
        settings = LLMSettings(
            model="gpt-4o-mini", base_url=server.base_url, api_key="sk-t", max_retries=0
        )

        async def run(i: int) -> str | None:
            agent = ToolCallAgent(llm=LLM.create(llm_config=settings))
            return (await agent.run(f"Task {i}")).final_answer

        answers = await asyncio.gather(*(run(i) for i in range(20)))
    assert answers == [f"answer {i}" for i in range(20)]
