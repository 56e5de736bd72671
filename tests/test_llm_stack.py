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


@pytest.mark.e2e
def test_importing_the_agent_loads_no_provider_sdk():
    """``import app.agent.manus`` (and building an OpenAI-profile agent) imports neither
    boto3/botocore nor the anthropic SDK: only a profile of theirs does."""
    code = (
        "import json, sys\n"
        "import app.agent.manus\n"
        "from app.config import LLMSettings\n"
        "from app.llm import LLM\n"
        "LLM.create(llm_config=LLMSettings(model='m', base_url='http://127.0.0.1:9/v1'))\n"
        "print(json.dumps(sorted(n for n in sys.modules if n.split('.')[0] in "
        "('boto3', 'botocore', 'anthropic'))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
