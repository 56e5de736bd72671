"""The step's fast paths behave exactly like the slow ones they replace: private attributes
read and written without pydantic's fallback, the wire cache kept in a slot of ``Message``,
pydantic-core's JSON in place of the standard library's, and the per-LLM caches (body fields,
context window, refusals). Each test states what a user can observe."""

from __future__ import annotations

import copy
import json
import pickle
from typing import Any

import pytest
from pydantic import PrivateAttr

from app.agent.toolcall import ToolCallAgent
from app.config import LLMSettings
from app.llm import LLM, Usage
from app.llm.arguments import loads_safely, parse_arguments
from app.llm.openai.formatting import prepare_messages
from app.llm.openai.wire import WireEntry, dumps, wire_entry
from app.llm.pricing import price_for
from app.llm.refusals import Refusals
from app.schema import Message
from app.strict import StrictModel
from app.testing import FunctionTransport


def _llm(**overrides: Any) -> LLM:
    settings = LLMSettings(model="m", base_url="http://127.0.0.1:9/v1", api_key="sk-test-123456")
    return LLM.create(
        llm_config=settings, transport=FunctionTransport(lambda m, i: "ok"), **overrides
    )


# ---- private attributes ------------------------------------------------------------------------


class _Counter(StrictModel):
    name: str = "c"
    _count: int = PrivateAttr(default=0)
    _items: list[int] = PrivateAttr(default_factory=list)

    def bump(self) -> int:
        self._count += 1
        self._items.append(self._count)
        return self._count


class _Child(_Counter):
    _extra: str | None = PrivateAttr(default=None)


def test_private_attributes_read_and_write_like_pydantic():
    first, second = _Counter(), _Counter()
    assert first.bump() == 1 and first.bump() == 2
    assert second._count == 0 and second._items == []  # defaults are per instance
    assert first.__pydantic_private__ == {"_count": 2, "_items": [1, 2]}
    copied = first.model_copy()  # shallow, as in pydantic: the list is shared
    assert copied._count == 2 and copied.bump() == 3 and first._count == 2
    assert first._items == [1, 2, 3]
    deep = copy.deepcopy(first)
    deep._items.append(99)
    assert first._items == [1, 2, 3] and deep._items == [1, 2, 3, 99]


def test_private_attribute_declarations_and_subclasses():
    assert _Counter._count.default == 0  # the class gives the declaration, as pydantic does
    child = _Child()
    child._extra = "x"
    assert child.bump() == 1 and child._extra == "x"
    assert {"_count", "_items", "_extra"} <= _Child.__plain_private__
    with pytest.raises(ValueError, match="no field"):
        child.undeclared = 1  # type: ignore[attr-defined]


def test_a_private_attribute_not_set_yet_raises_attribute_error():
    raw = _Counter.model_construct()
    object.__setattr__(raw, "__pydantic_private__", {})
    with pytest.raises(AttributeError):
        _ = raw._count


def test_agent_run_state_is_private_and_per_instance():
    a, b = ToolCallAgent(llm=_llm()), ToolCallAgent(llm=_llm())
    a.add_note("only for a")
    assert a._notes == ["only for a"] and b._notes == []


# ---- the wire cache in Message's slot ----------------------------------------------------------


def test_wire_cache_is_neither_copied_nor_pickled_nor_an_edit():
    message = Message.user_message("hello")
    entry = wire_entry(message)
    assert wire_entry(message) is entry  # cached
    assert message == Message.user_message("hello")  # the cache is not part of equality
    copied = message.model_copy()
    assert wire_entry(copied) is not entry and wire_entry(copied).wire == entry.wire
    restored = pickle.loads(pickle.dumps(message))
    assert restored == message and wire_entry(restored).json == entry.json
    message.content = "changed"  # an edit is noticed
    assert wire_entry(message).wire["content"] == "changed"


def test_subclassed_messages_are_cached_too():
    class Tagged(Message):
        pass

    message = Tagged(role="user", content="x")
    assert prepare_messages([message]).messages == [{"role": "user", "content": "x"}]
    assert wire_entry(message) is wire_entry(message)


@pytest.mark.parametrize(
    "text",
    ["plain", 'quote " back \\ slash', "tab\tnew\nline\x00\x1f\x7f", "é 中文 \u2028 </script>"],
)
def test_message_json_is_the_standard_encoding(text: str):
    message = Message(role="assistant", content=text)
    assert WireEntry(message).json == dumps({"role": "assistant", "content": text})


def test_message_json_with_lone_surrogates_is_escaped():
    message = Message(role="user", content="bad \udcff byte")
    encoded = WireEntry(message).json
    assert encoded.isascii() and json.loads(encoded)["content"] == "bad \udcff byte"


# ---- JSON decoding -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1}',
        '{"a": "\\ud83d\\ude00"}',  # a surrogate pair escaped (a lone one: test_text_safety)
        '{"a": NaN, "b": Infinity}',
        '{"big": 123456789012345678901234567890}',
        "[" * 300 + "]" * 300,  # deeper than pydantic-core's limit, within json's
    ],
)
def test_loads_safely_accepts_what_json_accepts(text: str):
    assert repr(loads_safely(text)) == repr(json.loads(text))


@pytest.mark.parametrize("text", ['{"a": 1,}', '{"a": "x\ty"}', "\ufeff{}", '{"a": tru}', ""])
def test_loads_safely_refuses_what_json_refuses(text: str):
    with pytest.raises(ValueError) as refused:
        loads_safely(text)
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(text)
    assert str(refused.value) == str(expected.value)  # the standard library's message


def test_argument_errors_name_the_position():
    with pytest.raises(ValueError, match=r"not valid JSON \(Expecting .* at position \d+\)"):
        parse_arguments('{"text": ')
    with pytest.raises(ValueError, match="too deeply nested"):
        parse_arguments("[" * 100_000)


# ---- per-LLM caches ------------------------------------------------------------------------------


def test_body_fields_keep_their_json_types():
    llm = _llm()
    assert json.loads(llm.endpoint._fields_json({"model": "m", "seed": 1})) == {
        "model": "m",
        "seed": 1,
    }
    # 1 == True in Python, not in JSON: a cached body must not turn one into the other.
    assert b'"seed":true' in llm.endpoint._fields_json({"model": "m", "seed": True})
    assert b'"seed":1.0' in llm.endpoint._fields_json({"model": "m", "seed": 1.0})


def test_body_fields_holding_lists_follow_edits():
    llm = _llm()
    stop = ["a"]
    assert b'"stop":["a"]' in llm.endpoint._fields_json({"stop": stop})
    stop.append("b")  # edited in place: the next body says so
    assert b'"stop":["a","b"]' in llm.endpoint._fields_json({"stop": stop})


def test_context_window_follows_the_model():
    llm = _llm(model="gpt-4o-mini")
    assert llm.context_window == 128_000
    llm.model = "claude-3-5-sonnet"
    assert llm.context_window == 200_000
    llm.max_input_tokens = 5_000
    assert llm.context_window == 5_000


async def test_refused_features_change_when_a_refusal_is_learned():
    refusals = Refusals("http://127.0.0.1:9/v1", "m", None)
    before = refusals.features
    assert before == frozenset() and refusals.may_stream(tools=True, allowed=True)
    await refusals.refuse("stream_tools", "test")
    assert refusals.features == {"stream_tools"}
    assert not refusals.may_stream(tools=True, allowed=True)
    assert refusals.may_stream(tools=False, allowed=True)


def test_usage_add_sums_and_marks_fields_set():
    total = Usage()
    total.add(Usage(prompt_tokens=3, completion_tokens=2, total_tokens=5, requests=1))
    total.add(Usage(prompt_tokens=1, total_tokens=1, requests=1, estimated=True, cost=0.5))
    assert (total.prompt_tokens, total.completion_tokens, total.total_tokens) == (4, 2, 6)
    assert total.requests == 2 and total.estimated and total.cost == 0.5
    assert total.model_dump(exclude_unset=True) == {
        "prompt_tokens": 4,
        "completion_tokens": 2,
        "total_tokens": 6,
        "cached_tokens": 0,
        "cache_write_tokens": 0,
        "requests": 2,
        "estimated": True,
        "cost": 0.5,
    }
    assert Usage(prompt_tokens=1) + Usage(prompt_tokens=2) == Usage(prompt_tokens=3)


def test_prices_come_from_the_loaded_config_only():
    from app.config import ModelPrice, config

    table = {"m": ModelPrice(input=1.0, output=2.0)}
    assert price_for("m", table) == table["m"]
    if not config.is_loaded:
        assert price_for("m") is None


def test_the_conversation_size_kept_across_steps_is_the_size_measured_anew():
    """``Measured`` reuses the previous request's size (its last message left out, as an
    agent's step prompt is new at every step) and notices in-place edits."""
    from app.llm.messages import Measured

    def fresh(conversation: list[Message]) -> int:
        return Measured().measure(conversation)[1]

    kept = Measured()
    convo = [Message.system_message("s" * 100), Message.user_message("task")]
    for step in range(5):
        request = [*convo, Message.user_message(f"next step {step}")]
        typed, size = kept.measure(request)
        assert typed is request and size == fresh(request)
        convo += [Message.assistant_message("a" * step), Message.user_message("r" * 10)]
    convo[1].content = "an edited task, longer than before"
    assert kept.measure(convo)[1] == fresh(convo)
    # Where the kept part ended, a message replaced (not extended): measured anew.
    convo[-2] = Message.user_message("x", base64_image="iVBORw0KGgo")
    assert kept.measure(convo)[1] == fresh(convo) > 2000
    del convo[2:6]  # compaction dropped turns: measured anew
    assert kept.measure(convo)[1] == fresh(convo)
