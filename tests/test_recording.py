"""Record a run's LLM exchanges, replay them offline (tools really run), and prices."""

from __future__ import annotations

import json

import pytest

from app.agent import Manus
from app.config import AppConfig, LLMSettings, ModelPrice
from app.exceptions import ReplayError
from app.llm.pricing import cost_of, price_for
from app.llm.recording import recording, replaying
from app.llm.usage import Usage
from app.testing import ScriptedLLMServer, call, text, tool_calls
from tests.conftest import TEST_API_KEY
from tests.test_main_e2e import run_main, write_config


def script():
    return [
        tool_calls(call("python_execute", {"code": "print(sum(range(10)))"}), content="Adding up."),
        tool_calls(
            call(
                "str_replace_editor", {"command": "create", "path": "sum.txt", "file_text": "45\n"}
            )
        ),
        tool_calls(call("terminate", {"status": "success"}), content="The sum is 45."),
    ]


@pytest.mark.e2e
async def test_record_then_replay_reproduces_the_run_offline(llm_server, make_llm, tmp_path):
    llm_server.push(*script())
    tape = tmp_path / "run.jsonl"
    first_ws = tmp_path / "first"
    with recording(tape) as recorder:
        agent = await Manus.create(llm=make_llm(), workspace=first_ws)
        events = []
        agent.subscribe(events.append)  # streamed: recorded reassembled
        original = await agent.run("add 0..9 and save it")
    assert recorder.count == 3 and original.final_answer == "The sum is 45."
    assert TEST_API_KEY not in tape.read_text()

    # Replay against a dead endpoint: nothing may reach the network.
    with ScriptedLLMServer() as dead:
        dead_url = dead.base_url
    replay_ws = tmp_path / "first"  # same workspace path, so the prompts match exactly
    (replay_ws / "sum.txt").unlink()
    with replaying(tape, strict=True) as replayer:
        agent = await Manus.create(llm=make_llm(base_url=dead_url), workspace=replay_ws)
        again = await agent.run("add 0..9 and save it")
    assert again.final_answer == original.final_answer and again.steps == original.steps
    assert again.usage.total_tokens == original.usage.total_tokens
    assert (replay_ws / "sum.txt").read_text() == "45\n"  # the tool really ran
    assert replayer.remaining == 0 and replayer.mismatches == []
    tool_output = next(m.content for m in agent.memory.messages if m.role == "tool")
    assert "45" in tool_output


@pytest.mark.e2e
async def test_a_departing_request_is_reported(llm_server, make_llm, tmp_path):
    llm_server.push(*script())
    tape = tmp_path / "run.jsonl"
    with recording(tape):
        agent = await Manus.create(llm=make_llm(), workspace=tmp_path / "a")
        await agent.run("add 0..9 and save it")

    with replaying(tape) as replayer:  # lenient: warn and go on
        agent = await Manus.create(llm=make_llm(), workspace=tmp_path / "a")
        result = await agent.run("a different prompt")
    assert result.final_answer == "The sum is 45."
    assert replayer.mismatches and "request 1 departs" in replayer.mismatches[0]
    assert "'a different prompt'" in replayer.mismatches[0]
    assert "'add 0..9 and save it'" in replayer.mismatches[0]

    with replaying(tape, strict=True):
        agent = await Manus.create(llm=make_llm(), workspace=tmp_path / "a")
        result = await agent.run("a different prompt")
    assert isinstance(result.error, ReplayError) and "messages[1]" in str(result.error)

    with replaying(tape):  # a longer run than recorded
        agent = await Manus.create(llm=make_llm(), workspace=tmp_path / "a")
        await agent.run("add 0..9 and save it")
        result = await agent.run("one more")
    assert isinstance(result.error, ReplayError) and "holds only 3" in str(result.error)


@pytest.mark.e2e
def test_record_and_replay_from_main(tmp_path, llm_server):
    llm_server.push(*script())
    workspace = tmp_path / "ws"
    cfg = write_config(tmp_path, llm_server.base_url)
    tape = tmp_path / "tape.jsonl"
    recorded = run_main(
        tmp_path,
        "-c",
        str(cfg),
        "-w",
        str(workspace),
        "--record",
        str(tape),
        "-p",
        "add 0..9 and save it",
    )
    assert recorded.returncode == 0, recorded.stderr
    (workspace / "sum.txt").unlink()
    requests_before = len(llm_server.requests)
    replayed = run_main(
        tmp_path,
        "-c",
        str(cfg),
        "-w",
        str(workspace),
        "--replay",
        str(tape),
        "--strict-replay",
        "-p",
        "add 0..9 and save it",
    )
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == recorded.stdout == "The sum is 45.\n"
    assert (workspace / "sum.txt").read_text() == "45\n"
    assert len(llm_server.requests) == requests_before  # nothing sent to the model
    bad = run_main(
        tmp_path,
        "-c",
        str(cfg),
        "-w",
        str(workspace),
        "--replay",
        str(tmp_path / "missing.jsonl"),
        "-p",
        "x",
    )
    assert bad.returncode == 2 and "Cannot read the recording" in bad.stderr
    both = run_main(
        tmp_path, "-c", str(cfg), "--replay", str(tape), "--record", str(tape), "-p", "x"
    )
    assert both.returncode == 2 and "cannot be used together" in both.stderr


def test_cost_from_a_price_table():
    table = {
        "gpt-4o": ModelPrice(input=2.5, output=10.0, cached_input=1.25),
        "claude-*": ModelPrice(input=3.0, output=15.0),
        "claude-3-haiku*": ModelPrice(input=0.25, output=1.25),
    }
    usage = Usage(prompt_tokens=1_000_000, completion_tokens=200_000, cached_tokens=400_000)
    price = price_for("gpt-4o", table)
    # 600k uncached at 2.50, 400k cached at 1.25, 200k out at 10.00
    assert cost_of(usage, price) == pytest.approx(1.5 + 0.5 + 2.0)
    assert price_for("GPT-4o", table) is price
    assert price_for("claude-3-haiku-20240307", table).input == 0.25  # longest prefix
    assert price_for("claude-sonnet-4", table).input == 3.0
    assert price_for("gpt-4o-mini", table) is None  # no made-up prices
    no_cache_price = cost_of(Usage(prompt_tokens=100, cached_tokens=100), table["claude-*"])
    assert no_cache_price == pytest.approx(100 * 3.0 / 1e6)


async def test_run_usage_and_cost_per_step_and_run(llm_server, tmp_path):
    from app.agent.toolcall import ToolCallAgent
    from app.config import config
    from app.events import UsageReport
    from app.llm import LLM

    settings = LLMSettings(model="gpt-4o", base_url=llm_server.base_url, api_key=TEST_API_KEY)
    config.use(
        AppConfig(
            llm=settings,
            workspace_root=tmp_path,
            pricing={"gpt-4o": {"input": 2.5, "output": 10.0}},
        )
    )
    try:
        llm_server.push(
            tool_calls(
                call("create_chat_completion", {"response": "x"}),
                usage={"prompt_tokens": 1000, "completion_tokens": 100},
            ),
            text("done", usage={"prompt_tokens": 2000, "completion_tokens": 50}),
        )
        agent = ToolCallAgent(llm=LLM.create(llm_config=settings), answer_tool_names=[])
        reports: list[UsageReport] = []
        agent.subscribe(lambda e: reports.append(e) if isinstance(e, UsageReport) else None)
        result = await agent.run("go")
        assert [r.cost for r in reports] == pytest.approx([0.0035, 0.0055])
        assert reports[-1].run_cost == pytest.approx(0.009)
        assert result.usage.cost == pytest.approx(0.009)
        assert "cost $0.0090" in str(result.usage)
        # An endpoint without usage is estimated, and says so.
        llm_server.push(text("no usage reported", usage=False))
        estimated = await agent.run("again")
        assert estimated.usage.estimated and "(estimated)" in str(estimated.usage)
        assert estimated.usage.prompt_tokens > 0 and estimated.usage.cost is not None
    finally:
        config.reset()


def test_pricing_config_errors_are_clear(tmp_path):
    from app.config import load_config
    from app.exceptions import ConfigError

    path = tmp_path / "config.toml"
    path.write_text('[llm]\nmodel = "m"\n[pricing."gpt-4o"]\ninput = 2.5\n')
    with pytest.raises(ConfigError, match=r"output: required"):
        load_config(path)
    path.write_text(
        '[llm]\nmodel = "m"\n[pricing."gpt-4o"]\ninput = 2.5\noutput = 10\n'
        "[compaction]\ntrigger = 0.9\nkeep_recent_turns = 5\n"
    )
    loaded = load_config(path)
    assert loaded.pricing["gpt-4o"].output == 10
    assert loaded.compaction.keep_recent_turns == 5
    assert json.loads(loaded.compaction.model_dump_json())["trigger"] == 0.9


# ---- the tape holds our types: one format for every model ---------------------------------


def _turns():
    return [
        tool_calls(call("python_execute", {"code": "print(6 * 7)"}), content="Computing."),
        tool_calls(call("terminate", {"status": "success"}), content="It is 42."),
    ]


@pytest.mark.e2e
async def test_a_run_recorded_on_one_provider_replays_on_another(tmp_path):
    """Recorded against the scripted Anthropic server (its SDK, its wire format), replayed
    by an OpenAI-compatible profile whose endpoint is dead: same answers, tools re-run."""
    from app.agent.toolcall import ToolCallAgent
    from app.llm import LLM
    from app.testing.anthropic_server import ScriptedAnthropicServer
    from app.tool import PythonExecute, Terminate, ToolCollection
    from tests.anthropic_helpers import anthropic_settings

    tape = tmp_path / "run.jsonl"
    tools = lambda: ToolCollection(PythonExecute(), Terminate())  # noqa: E731
    with ScriptedAnthropicServer(_turns()) as server, recording(tape) as recorder:
        llm = LLM.create(llm_config=anthropic_settings(server))
        first = await ToolCallAgent(llm=llm, available_tools=tools()).run("What is 6 * 7?")
        await llm.aclose()
    assert recorder.count == 2 and first.final_answer == "It is 42."
    lines = [json.loads(line) for line in tape.read_text().splitlines()]
    assert lines[0]["version"] == 2 and lines[1]["model"] == "claude-sonnet-4-6"
    assert lines[1]["response"]["message"]["tool_calls"][0]["function"]["name"] == "python_execute"

    with ScriptedLLMServer() as dead:
        dead_url = dead.base_url
    settings = LLMSettings(model="gpt-4o", base_url=dead_url, api_key=TEST_API_KEY)
    with replaying(tape, strict=True) as replayer:
        agent = ToolCallAgent(llm=LLM.create(llm_config=settings), available_tools=tools())
        again = await agent.run("What is 6 * 7?")
    assert again.final_answer == "It is 42." and replayer.remaining == 0
    assert "42" in next(m.content for m in agent.memory.messages if m.role == "tool")


async def test_a_users_model_is_recorded_and_a_version_1_tape_still_replays(tmp_path):
    """A model of your own passes the same tape; a tape of the previous format (OpenAI
    completion bodies) replays."""
    from app.llm import LLM
    from app.schema import Message, ToolCall
    from app.testing import FunctionModel

    tape = tmp_path / "mine.jsonl"
    model = FunctionModel(lambda messages, info: ToolCall.function_call("echo", {"t": "x"}))
    with recording(tape):
        made = await LLM.from_model(model).request([Message.user_message("go")])
    entry = json.loads(tape.read_text().splitlines()[1])
    assert entry["model"] == "function"
    assert entry["request"]["messages"] == [{"role": "user", "content": "go"}]
    with replaying(tape, strict=True):
        replayed = await LLM.from_model(FunctionModel(lambda m, i: "unused")).request(
            [Message.user_message("go")]
        )
    assert replayed.message.tool_calls == made.message.tool_calls
    assert replayed.finish_reason == "tool_calls"

    old = tmp_path / "v1.jsonl"
    body = {
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "old answer", "reasoning_content": "r"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11},
    }
    request = {"messages": [{"role": "user", "content": "hi"}]}
    old.write_text(
        json.dumps({"type": "header", "format": "openmanus-llm-recording", "version": 1})
        + "\n"
        + json.dumps({"type": "exchange", "index": 0, "request": request, "response": body})
        + "\n"
    )
    with replaying(old, strict=True):
        answer = await LLM.from_model(FunctionModel(lambda m, i: "unused")).request(
            [Message.user_message("hi")]
        )
    assert answer.message.content == "old answer" and answer.reasoning == "r"
    assert answer.usage.prompt_tokens == 9


@pytest.mark.parametrize(
    "response", [{"message": {"role": 7}}, {"choices": "x"}, ["not", "an", "object"]]
)
async def test_a_hand_edited_tape_is_a_replay_error(tmp_path, response):
    from app.llm import LLM
    from app.schema import Message
    from app.testing import FunctionModel

    tape = tmp_path / "bad.jsonl"
    tape.write_text(
        json.dumps({"type": "header", "format": "openmanus-llm-recording", "version": 2})
        + "\n"
        + json.dumps({"type": "exchange", "request": "?", "response": response})
        + "\n"
    )
    with replaying(tape), pytest.raises(ReplayError, match="is not one"):
        await LLM.from_model(FunctionModel(lambda m, i: "x")).ask([Message.user_message("hi")])
