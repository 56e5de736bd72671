"""Messages and memory: upstream constructors, and trimming that never orphans tool results."""

from __future__ import annotations

import random

import pytest

from app.schema import AgentState, Function, Memory, Message, Role, ToolCall, ToolChoice


def test_constructors_and_to_dict():
    assert Message.user_message("hi").to_dict() == {"role": "user", "content": "hi"}
    assert Message.system_message("s").to_dict() == {"role": "system", "content": "s"}
    assert Message.assistant_message("a").to_dict() == {"role": "assistant", "content": "a"}
    tool = Message.tool_message("out", name="bash", tool_call_id="c1")
    assert tool.to_dict() == {
        "role": "tool",
        "content": "out",
        "name": "bash",
        "tool_call_id": "c1",
    }
    img = Message.user_message("look", base64_image="AAAA")
    assert img.to_dict()["base64_image"] == "AAAA"


def test_from_tool_calls_accepts_objects_and_dicts():
    ours = ToolCall(id="a", function=Function(name="f", arguments='{"x": 1}'))
    msg = Message.from_tool_calls(
        [ours, {"id": "b", "function": {"name": "g", "arguments": {"y": 2}}}], content=["p", "q"]
    )
    assert msg.role == "assistant" and msg.content == "p\nq"
    assert [c.id for c in msg.tool_calls] == ["a", "b"]
    assert msg.tool_calls[1].function.arguments == '{"y": 2}'
    assert msg.to_dict()["tool_calls"][0] == {
        "id": "a",
        "type": "function",
        "function": {"name": "f", "arguments": '{"x": 1}'},
    }


def test_message_addition():
    a, b, c = (Message.user_message(x) for x in "abc")
    assert a + b == [a, b]
    assert a.__add__([b, c]) == [a, b, c]
    assert c.__radd__([a, b]) == [a, b, c]
    with pytest.raises(TypeError):
        a + "nope"


def test_enums_match_upstream_values():
    assert [r.value for r in Role] == ["system", "user", "assistant", "tool"]
    assert [c.value for c in ToolChoice] == ["none", "auto", "required"]
    assert [s.value for s in AgentState] == ["IDLE", "RUNNING", "FINISHED", "ERROR"]


def test_memory_basics():
    memory = Memory()
    memory.add_message(Message.user_message("1"))
    memory.add_messages([Message.user_message("2"), Message.user_message("3")])
    assert [m.content for m in memory.get_recent_messages(2)] == ["2", "3"]
    assert memory.get_recent_messages(0) == []
    assert memory.to_dict_list()[0] == {"role": "user", "content": "1"}
    memory.clear()
    assert memory.messages == []


def _turn(rng: random.Random, n: int) -> list[Message]:
    count = rng.randint(1, 4)
    calls = [ToolCall(id=f"t{n}_{i}", function=Function(name="f")) for i in range(count)]
    turn = [Message.from_tool_calls(calls)]
    turn += [Message.tool_message("r", name="f", tool_call_id=c.id) for c in calls]
    return turn


def _assert_no_orphans(messages: list[Message]) -> None:
    pending: set[str] = set()
    for msg in messages:
        if msg.role == "tool":
            assert msg.tool_call_id in pending, "orphaned tool message"
            pending.discard(msg.tool_call_id)
        else:
            pending = {c.id for c in msg.tool_calls or []}


@pytest.mark.parametrize("seed", range(25))
def test_trimming_never_orphans_tool_results(seed):
    rng = random.Random(seed)
    limit = rng.randint(3, 30)
    memory = Memory(max_messages=limit)
    memory.add_message(Message.system_message("sys"))
    for n in range(60):
        kind = rng.random()
        if kind < 0.3:
            memory.add_message(Message.user_message(f"u{n}"))
        elif kind < 0.5:
            memory.add_message(Message.assistant_message(f"a{n}"))
        else:
            turn = _turn(rng, n)
            if rng.random() < 0.5:
                memory.add_messages(turn)
            else:
                for message in turn:  # one at a time, as the agent adds them
                    memory.add_message(message)
        _assert_no_orphans(memory.messages)
        assert memory.messages[0].role == "system"  # the system message survives
        non_system = [m for m in memory.messages if m.role != "system"]
        assert non_system and non_system[0].role != "tool"
        # Over the limit only while the newest turn alone is larger than the budget.
        if len(memory.messages) > limit:
            assert memory.messages[1].tool_calls


def test_trimming_keeps_newest_messages_in_order():
    memory = Memory(max_messages=10)
    for i in range(25):
        memory.add_message(Message.user_message(str(i)))
    contents = [int(m.content) for m in memory.messages]
    assert len(contents) <= 10
    assert contents == list(range(25 - len(contents), 25))
