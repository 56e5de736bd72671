"""The stack a profile gets, picked by its api_type: OpenAI-compatible endpoints, Bedrock
(``"aws"``) and Anthropic (``"anthropic"``), and the config keys they need."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.config import LLMSettings, load_config
from app.exceptions import ConfigError

ROOT = Path(__file__).resolve().parent.parent

#: Upstream's example Bedrock block, as written there.
UPSTREAM_BEDROCK = """
[llm] # Amazon Bedrock
api_type = "aws"                                       # Required
model = "us.anthropic.claude-3-7-sonnet-20250219-v1:0" # Bedrock supported modelID
base_url = "bedrock-runtime.us-west-2.amazonaws.com"   # Not used now
max_tokens = 8192
temperature = 1.0
api_key = "bear"                                       # Required but not used for Bedrock
"""


def _load(tmp_path: Path, body: str):
    path = tmp_path / "config.toml"
    path.write_text(body, encoding="utf-8")
    return load_config(path)


def test_upstreams_bedrock_block_loads_as_written(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-for-bedrock")
    settings = _load(tmp_path, UPSTREAM_BEDROCK).llm["default"]
    assert settings.api_type == "aws"
    assert settings.model == "us.anthropic.claude-3-7-sonnet-20250219-v1:0"
    assert settings.base_url == "https://bedrock-runtime.us-west-2.amazonaws.com"
    assert settings.api_key == "bear" and settings.max_tokens == 8192
    del_key = UPSTREAM_BEDROCK.replace('api_key = "bear"', "")
    # Bedrock's credentials come from the AWS chain: an OpenAI key is never borrowed for it.
    assert _load(tmp_path, del_key).llm["default"].api_key is None


def test_an_anthropic_profile_takes_its_key_from_its_own_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-key")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-key-0123")
    body = (
        '[llm]\nmodel = "gpt-4o"\n[llm.claude]\napi_type = "anthropic"\n'
        'model = "claude-sonnet-4-5"\nthinking_budget = 2048\nmax_tokens = 8192\n'
        "prompt_cache = false\n"
    )
    profiles = _load(tmp_path, body).llm
    claude = profiles["claude"]
    assert claude.api_type == "anthropic" and claude.api_key == "sk-ant-key-0123"
    assert claude.thinking_budget == 2048 and claude.prompt_cache is False
    assert profiles["default"].api_key == "sk-openai-key"


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        ('aws_region = "us-east-1"', "aws_region applies to api_type \"aws\", not 'openai'"),
        ('aws_profile = "dev"', "aws_profile applies to api_type"),
        ("thinking_budget = 2048", 'thinking_budget applies to api_type "anthropic" or "aws"'),
    ],
)
def test_a_key_of_another_api_is_named(tmp_path, keys, expected):
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, f'[llm]\nmodel = "gpt-4o"\napi_key = "sk-x-0123456"\n{keys}\n')
    assert expected in str(caught.value)


@pytest.mark.parametrize(
    ("budget", "expected"),
    [(512, "greater than or equal to 1024"), (4096, r"must be below max_tokens \(4096\)")],
)
def test_a_thinking_budget_the_api_would_refuse_is_refused_at_load(budget, expected):
    with pytest.raises(ValueError, match=expected):
        LLMSettings(model="claude-sonnet-4-5", api_type="anthropic", thinking_budget=budget)


def test_other_api_types_still_need_a_full_url():
    with pytest.raises(ValueError, match="must be a full URL"):
        LLMSettings(model="m", api_type="anthropic", base_url="api.anthropic.com")
    aws = LLMSettings(
        model="m", api_type="AWS", base_url=" bedrock-runtime.eu-west-1.amazonaws.com"
    )
    assert aws.base_url == "https://bedrock-runtime.eu-west-1.amazonaws.com"


def _python(code: str) -> str:
    """The output of ``code`` run by a fresh interpreter (which must succeed)."""
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.e2e
def test_importing_the_agent_loads_no_provider_sdk():
    """``import app.agent.manus`` (and building an OpenAI-profile agent) imports neither
    boto3/botocore nor the anthropic SDK: only a profile of theirs does. Nor tenacity: the
    retry loop is imported on a first failure."""
    code = (
        "import json, sys\n"
        "import app.agent.manus\n"
        "from app.config import LLMSettings\n"
        "from app.llm import LLM\n"
        "LLM.create(llm_config=LLMSettings(model='m', base_url='http://127.0.0.1:9/v1'))\n"
        "print(json.dumps(sorted(n for n in sys.modules if n.split('.')[0] in "
        "('boto3', 'botocore', 'anthropic', 'tenacity'))))\n"
    )
    assert json.loads(_python(code).strip().splitlines()[-1]) == []


# ---- one seam: the stack every model gets, and who may import the wire packages -----------

WIRE_PACKAGES = ("app.llm.openai", "app.llm.bedrock", "app.llm.anthropic")


def test_only_the_stack_may_import_a_wire_package():
    """The linter's contract names every other module of app.llm (a new module is covered
    the day it is added), and the wire packages are exactly the three."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = {c["name"]: c for c in config["tool"]["importlinter"]["contracts"]}
    forbidden = contracts["Only the stack knows the wire packages"]
    modules = {"app.llm"} | {
        f"app.llm.{path.stem}"
        for path in (ROOT / "app" / "llm").glob("*.py")
        if path.stem != "__init__"
    }
    assert sorted(forbidden["source_modules"]) == sorted(modules - {"app.llm.stack"})
    assert forbidden["forbidden_modules"] == list(WIRE_PACKAGES)
    packages = {
        f"app.llm.{p.name}"
        for p in (ROOT / "app" / "llm").iterdir()
        if (p / "__init__.py").exists()
    }
    assert packages == set(WIRE_PACKAGES)
    assert contracts["The wire packages do not know each other"]["modules"] == list(WIRE_PACKAGES)


def _chain(model):
    names = []
    while model is not None:
        names.append(type(model).__name__)
        model = getattr(model, "inner", None)
    return names


def test_every_profile_and_every_model_gets_the_same_wrappers(monkeypatch, tmp_path):
    from app.llm import LLM
    from app.testing import FunctionModel
    from tests.bedrock_helpers import isolate_aws

    isolate_aws(monkeypatch, tmp_path)
    wrappers = ["Retrying", "Recording", "RateGate", "Timed"]
    profiles = {
        "OpenAIChatModel": LLMSettings(model="gpt-4o", base_url="http://127.0.0.1:9/v1"),
        "AnthropicModel": LLMSettings(model="claude-sonnet-4-6", api_type="anthropic", api_key="k"),
        "BedrockModel": LLMSettings(
            model="us.anthropic.claude-3-7-sonnet-20250219-v1:0",
            api_type="aws",
            base_url="bedrock-runtime.us-west-2.amazonaws.com",
        ),
    }
    for wire, settings in profiles.items():
        llm = LLM.create(llm_config=settings)
        assert _chain(llm._model) == ["TextToolCalls", *wrappers, wire]
        assert type(llm.endpoint).__name__ == wire and llm.supports_images
    mine = FunctionModel(lambda messages, info: "ok")
    assert _chain(LLM.from_model(mine)._model) == [*wrappers, "FunctionModel"]


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("api_type", "blocked", "extra"),
    [("aws", ("boto3", "botocore"), "bedrock"), ("anthropic", ("anthropic",), "anthropic")],
)
def test_a_missing_extra_is_a_clear_error_naming_it(api_type, blocked, extra):
    code = (
        "import sys\n"
        f"for name in {blocked!r}:\n"
        "    sys.modules[name] = None  # as if not installed\n"
        "from app.config import LLMSettings\n"
        "from app.exceptions import ConfigError\n"
        "from app.llm import LLM\n"
        f"settings = LLMSettings(model='m', api_type={api_type!r}, aws_region='us-east-1' "
        f"if {api_type!r} == 'aws' else None)\n"
        "try:\n"
        "    LLM.create(llm_config=settings)\n"
        "except ConfigError as e:\n"
        "    print(e)\n"
    )
    out = _python(code)
    assert f"install -e '.[{extra}]'" in out, out


# ---- issue 37: keywords that mean nothing are errors; a hopeless request is not sent ------


def test_unknown_keywords_are_errors_naming_them():
    from app.llm import LLM
    from app.testing import TestModel

    settings = LLMSettings(model="m", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(TypeError, match=r"LLM\(\): settings; accepted: config_name, llm_config"):
        LLM("tmp-unknown-keyword", settings=settings)
    assert "tmp-unknown-keyword" not in LLM.registry.instances
    with pytest.raises(TypeError, match=r"LLM.create\(\): settings;.*llm_config.*base_url"):
        LLM.create(settings=settings)
    with pytest.raises(TypeError, match=r"LLM.from_model\(\): max_token;"):
        LLM.from_model(TestModel(), max_token=5)
    llm = LLM.create(llm_config=settings, max_tokens=77)
    assert llm.max_tokens == 77
    with pytest.raises(ValueError):  # checked as the config file's
        LLM.create(llm_config=settings, max_tokens=-1)


async def test_a_request_that_cannot_fit_by_far_is_refused_before_sending(llm_server, make_llm):
    """qwen's known 32,768-token window: a task five times larger than any count could be off
    is refused with what it needs; one over the window by less is sent (the server decides)."""
    from app.exceptions import ContextWindowExceededError
    from app.schema import Message
    from app.testing import text

    llm = make_llm(model="qwen2.5-7b-instruct")
    huge = Message.user_message("lorem ipsum dolor sit amet " * 36_000)  # ~1 MB
    with pytest.raises(ContextWindowExceededError) as caught:
        await llm.request([huge])
    error = caught.value
    assert "not sent" in str(error) and "32,768-token context window" in str(error)
    assert error.limit == 32_768 and error.tokens is not None and error.tokens > 5 * 32_768
    assert llm_server.requests == []
    llm_server.push(text("the server decides"))
    over = Message.user_message("lorem ipsum dolor sit amet " * 12_000)  # about 3x the window
    assert (await llm.request([over])).message.content == "the server decides"


async def test_counts_calibrated_to_the_server_refuse_beyond_twice_the_window(llm_server, make_llm):
    from app.exceptions import ContextWindowExceededError
    from app.schema import Message
    from app.testing import text

    llm = make_llm(model="local-llama", max_input_tokens=2_000)
    assert llm.token_counter.estimated
    small = [Message.user_message("one two three four " * 50)]
    ours = await llm.count_request_tokens(small)
    llm_server.push(text("ok", usage={"prompt_tokens": ours, "completion_tokens": 1}))
    await llm.request(small)  # the server counts as we do: a ratio of 1 is learned
    assert await llm.count_request_tokens(small) == ours
    assert llm.server_counts.ratio == pytest.approx(1.0)
    with pytest.raises(ContextWindowExceededError, match="more than 2 times"):
        await llm.request([Message.user_message("one two three four " * 1_500)])
    llm_server.push(text("sent"))
    assert (await llm.ask([Message.user_message("one two three four " * 700)])) == "sent"
    assert len(llm_server.requests) == 2


@pytest.mark.parametrize(
    ("header", "api_type"), [("Anthropic", "anthropic"), ("Amazon Bedrock", "aws")]
)
def test_the_example_configs_profiles_load_as_shown(tmp_path, monkeypatch, header, api_type):
    """config/config.example.toml's commented block for the API, uncommented, loads."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-example-0123")
    lines = (ROOT / "config" / "config.example.toml").read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"# --- {header}"))
    block = []
    for line in lines[start + 1 :]:
        if not line.startswith("#"):
            break
        if line.startswith("# [llm]") or block:
            block.append(line[2:])
    settings = _load(tmp_path, "\n".join(block) + "\n").llm["default"]
    assert settings.api_type == api_type and settings.thinking_budget == 4096
    assert settings.prompt_cache is True
