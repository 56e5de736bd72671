"""Where Bedrock requests go and who signs them: the region and endpoint from the profile and
the environment, credentials from the AWS chain (environment, a profile's files, a container
role served on 127.0.0.1 with no key in the config), a Bedrock API key, and the secrets kept
out of logs. Every request is checked by the scripted server (SigV4 recomputed by botocore)."""

from __future__ import annotations

import asyncio
import datetime
import http.server
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from app.config import LLMSettings
from app.exceptions import ConfigError, LLMAuthenticationError
from app.llm import LLM, ModelParams
from app.llm.bedrock import BedrockModel
from app.llm.bedrock.endpoint import resolve_endpoint
from app.logger import redact
from app.schema import Message
from app.testing.bedrock_server import ScriptedBedrockServer
from tests.bedrock_helpers import MODEL_ID, isolate_aws, settings_for

ROOT = Path(__file__).resolve().parent.parent
ASK = [Message.user_message("Hi")]


def endpoint(env: dict[str, str] | None = None, **settings: Any) -> tuple[str, str | None]:
    found = resolve_endpoint(SimpleNamespace(**settings), env or {})
    return found.base if found.region or found.url else "", found.region


# --- region and endpoint -----------------------------------------------------------------------


def test_upstreams_block_names_region_and_endpoint_by_its_host() -> None:
    settings = LLMSettings(
        api_type="aws",
        model=MODEL_ID,
        api_key="bear",
        base_url="bedrock-runtime.us-west-2.amazonaws.com",
    )
    model = BedrockModel.from_settings(settings)
    assert (model.region, model.endpoint) == (
        "us-west-2",
        "https://bedrock-runtime.us-west-2.amazonaws.com",
    )


@pytest.mark.parametrize(
    ("host", "region"),
    [
        ("bedrock-runtime.eu-central-1.amazonaws.com", "eu-central-1"),
        ("https://bedrock-runtime-fips.us-gov-west-1.amazonaws.com/", "us-gov-west-1"),
        ("vpce-0a1b2c.bedrock-runtime.ap-southeast-2.vpce.amazonaws.com", "ap-southeast-2"),
        ("bedrock-runtime.cn-north-1.amazonaws.com.cn", "cn-north-1"),
        ("http://127.0.0.1:8080", None),
    ],
)
def test_the_region_is_read_from_the_host(host: str, region: str | None) -> None:
    assert endpoint(base_url=host)[1] == region


def test_the_environment_overrides_the_endpoint_not_the_region_base_url_names() -> None:
    host = "bedrock-runtime.us-west-2.amazonaws.com"
    env = {"AWS_ENDPOINT_URL_BEDROCK_RUNTIME": "http://127.0.0.1:9/", "AWS_REGION": "eu-west-1"}
    assert endpoint(env, base_url=host) == ("http://127.0.0.1:9", "us-west-2")
    assert endpoint({"AWS_ENDPOINT_URL": "http://127.0.0.1:7"}, base_url=host)[0] == (
        "http://127.0.0.1:7"
    )
    ignored = {**env, "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "true"}
    assert endpoint(ignored, base_url=host)[0] == f"https://{host}"


def test_without_base_url_the_region_comes_from_settings_then_the_environment() -> None:
    both = {"AWS_REGION": "eu-west-1", "AWS_DEFAULT_REGION": "us-east-2"}
    assert endpoint(both) == ("https://bedrock-runtime.eu-west-1.amazonaws.com", "eu-west-1")
    assert endpoint({"AWS_DEFAULT_REGION": "us-east-2"})[1] == "us-east-2"
    assert endpoint(both, aws_region="ap-south-1")[1] == "ap-south-1"
    assert endpoint({"AWS_REGION": "cn-northwest-1"})[0].endswith(".amazonaws.com.cn")


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        ({"aws_region": "mars-1"}, "not an AWS region"),
        ({"base_url": "ftp://bedrock"}, "not a Bedrock endpoint"),
        ({"base_url": "https://x.test/?a=b"}, "query"),
    ],
)
def test_bad_values_are_config_errors(settings: dict[str, str], words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        endpoint(**settings)


@pytest.mark.parametrize("variable", ["AWS_REGION", "AWS_DEFAULT_REGION"])
def test_a_region_that_would_move_the_host_is_refused(variable: str) -> None:
    """The region becomes part of the endpoint's host: ``evil.test/x`` must not send signed
    requests to ``bedrock-runtime.evil.test``."""
    with pytest.raises(ConfigError, match="not an AWS region name"):
        endpoint({variable: "evil.test/x"})


def test_a_profiles_region_is_checked_too(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_aws(monkeypatch, tmp_path)
    (tmp_path / "aws-config").write_text("[default]\nregion = evil.test#\n")
    with pytest.raises(ConfigError, match="not an AWS region name"):
        BedrockModel.from_settings(LLMSettings(api_type="aws", model=MODEL_ID))


def test_a_missing_region_names_every_way_to_give_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    isolate_aws(monkeypatch, tmp_path)
    settings = LLMSettings(api_type="aws", model=MODEL_ID)
    with pytest.raises(ConfigError) as caught:
        BedrockModel.from_settings(settings)
    for name in ("aws_region", "base_url", "AWS_REGION", "AWS_DEFAULT_REGION", "config file"):
        assert name in str(caught.value)
    # Through the stack, the same error when the profile is built.
    with pytest.raises(ConfigError, match="No AWS region"):
        LLM.create(llm_config=settings)


# --- credentials -------------------------------------------------------------------------------


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[ScriptedBedrockServer]:
    isolate_aws(monkeypatch, tmp_path)
    with ScriptedBedrockServer() as started:
        yield started


async def test_keys_from_the_environment(
    server: ScriptedBedrockServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", server.access_key or "")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", server.secret_key)
    server.push("from env")
    model = BedrockModel.from_settings(settings_for(server))
    assert (await model.request(ASK, ModelParams())).message.content == "from env"
    assert model.auth.method == "env" and server.requests[0].auth == "sigv4"


async def test_a_named_profile_gives_keys_and_region(
    server: ScriptedBedrockServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "aws-credentials").write_text(
        f"[work]\naws_access_key_id = {server.access_key}\n"
        f"aws_secret_access_key = {server.secret_key}\n"
    )
    (tmp_path / "aws-config").write_text("[profile work]\nregion = us-west-2\n")
    server.push("from the profile")
    settings = settings_for(server, aws_region=None, aws_profile="work")
    model = BedrockModel.from_settings(settings)
    assert model.region == "us-west-2"
    assert (await model.request(ASK, ModelParams())).message.content == "from the profile"
    assert model.auth.method == "shared-credentials-file"
    # AWS_PROFILE names it as well.
    monkeypatch.setenv("AWS_PROFILE", "work")
    server.push("again")
    plain = BedrockModel.from_settings(settings_for(server, aws_region=None))
    assert (await plain.request(ASK, ModelParams())).message.content == "again"


async def test_an_unknown_profile_is_a_clear_error(server: ScriptedBedrockServer) -> None:
    model = BedrockModel.from_settings(settings_for(server, aws_profile="nope"))
    with pytest.raises(LLMAuthenticationError, match=r"'nope'.*aws_profile"):
        await model.request(ASK, ModelParams())
    assert server.requests == []


async def test_no_credentials_anywhere_is_a_clear_error_before_any_request(
    server: ScriptedBedrockServer,
) -> None:
    llm = LLM.create(llm_config=settings_for(server))
    with pytest.raises(LLMAuthenticationError) as caught:
        await llm.ask(ASK, stream=False)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_PROFILE", "IAM role", "AWS_BEARER_TOKEN_BEDROCK"):
        assert name in str(caught.value)
    assert server.requests == []


class _Role(http.server.BaseHTTPRequestHandler):
    """The container credentials endpoint (ECS task role, EKS pod identity)."""

    calls: list[str | None] = []
    credentials: dict[str, str] = {}
    arrived = threading.Event()
    #: When set, answers wait for it (a slow credentials endpoint).
    gate: threading.Event | None = None

    def do_GET(self) -> None:
        type(self).calls.append(self.headers.get("Authorization"))
        type(self).arrived.set()
        if type(self).gate is not None:
            type(self).gate.wait(30)
        body = json.dumps(type(self).credentials).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def role(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[_Role]]:
    attributes = {"calls": [], "credentials": {}, "arrived": threading.Event(), "gate": None}
    handler = type("Role", (_Role,), attributes)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv(
        "AWS_CONTAINER_CREDENTIALS_FULL_URI", f"http://127.0.0.1:{httpd.server_port}/role"
    )
    monkeypatch.setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", "container-auth-token")
    try:
        yield handler
    finally:
        if handler.gate is not None:
            handler.gate.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(10)


def _expiring_in(seconds: int) -> str:
    when = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=seconds)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


async def test_a_container_role_needs_no_key_in_the_config(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, role: type[_Role]
) -> None:
    token = "IQoJb3JpZ2luX2VjEROLESESSIONTOKEN0123456789abcdef"
    with ScriptedBedrockServer(
        access_key="ASIAROLEKEY000000001",
        secret_key="role-secret-0123456789abcdef",
        session_token=token,
    ) as server:
        role.credentials = {
            "AccessKeyId": server.access_key or "",
            "SecretAccessKey": server.secret_key,
            "Token": token,
            "Expiration": _expiring_in(3600),
        }
        server.push("as the role", "still the role")
        model = BedrockModel.from_settings(settings_for(server))
        assert (await model.request(ASK, ModelParams())).message.content == "as the role"
        await model.request(ASK, ModelParams())
        assert model.auth.method == "container-role"
        # Fetched once and kept (an hour left), with the container's authorization token.
        assert role.calls == ["container-auth-token"]
    assert server.requests[0].headers["x-amz-security-token"] == token
    assert token not in redact(f"token={token}") and server.secret_key not in redact(
        server.secret_key
    )
    assert "container-auth-token" not in redact("the role's key: container-auth-token")


async def test_a_request_cancelled_while_credentials_resolve_returns_at_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, role: type[_Role]
) -> None:
    """The chain runs in a thread of its own: the cancelled request does not wait for it, and
    what it finds serves the next request."""
    with ScriptedBedrockServer(access_key="ASIAROLEKEY000000003", session_token="s" * 40) as server:
        role.credentials = {
            "AccessKeyId": server.access_key or "",
            "SecretAccessKey": server.secret_key,
            "Token": "s" * 40,
            "Expiration": _expiring_in(3600),
        }
        role.gate = threading.Event()
        model = BedrockModel.from_settings(settings_for(server))
        task = asyncio.create_task(model.request(ASK, ModelParams()))
        assert await asyncio.to_thread(role.arrived.wait, 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 5)
        assert server.requests == [] and not role.gate.is_set()
        role.gate.set()  # the endpoint answers after all
        server.push("with the credentials found meanwhile")
        answer = await model.request(ASK, ModelParams())
        assert answer.message.content == "with the credentials found meanwhile"
        assert len(role.calls) == 1


async def test_role_credentials_about_to_expire_are_refreshed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, role: type[_Role]
) -> None:
    with ScriptedBedrockServer(access_key="ASIAROLEKEY000000002", session_token="t" * 40) as server:
        role.credentials = {
            "AccessKeyId": server.access_key or "",
            "SecretAccessKey": server.secret_key,
            "Token": "t" * 40,
            "Expiration": _expiring_in(30),  # inside every refresh window
        }
        server.push("one", "two")
        model = BedrockModel.from_settings(settings_for(server))
        await model.request(ASK, ModelParams())
        await model.request(ASK, ModelParams())
    assert len(role.calls) >= 2 and [r.rejected for r in server.requests] == [None, None]


async def test_a_bedrock_api_key_is_sent_as_a_bearer_token(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    isolate_aws(monkeypatch, tmp_path)
    key = "ABSKQmVkcm9ja0FQSUtleS1leGFtcGxlLWtleQ=="
    with ScriptedBedrockServer(access_key=None, bearer_token=key) as server:
        monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", key)
        server.push("with a key")
        model = BedrockModel.from_settings(settings_for(server))
        assert (await model.request(ASK, ModelParams())).message.content == "with a key"
        assert model.auth.method == "bearer"
        assert server.requests[0].headers["authorization"] == f"Bearer {key}"
        assert key not in redact(f"key {key}")
        monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "ABSKwrong0123456789abcdefghijklmn")
        llm = LLM.create(llm_config=settings_for(server))
        with pytest.raises(LLMAuthenticationError, match="UnrecognizedClient"):
            await llm.ask(ASK, stream=False)
        assert [r.auth for r in server.requests] == ["bearer", None]
        monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "ABSKinjected\r\nX-Evil: 1")
        with pytest.raises(LLMAuthenticationError, match="characters no API key has"):
            await llm.ask(ASK, stream=False)
        assert len(server.requests) == 2


async def test_upstreams_block_runs_with_the_endpoint_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``base_url = "bedrock-runtime.us-west-2.amazonaws.com"`` as written; the endpoint
    override sends the requests to the scripted server, signed for us-west-2."""
    isolate_aws(monkeypatch, tmp_path)
    with ScriptedBedrockServer(["Hello from us-west-2"]) as server:
        for name, value in server.env().items():
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("AWS_REGION")
        settings = LLMSettings(
            api_type="aws",
            model=MODEL_ID,
            base_url="bedrock-runtime.us-west-2.amazonaws.com",
            api_key="bear",
            max_tokens=8192,
            temperature=1.0,
        )
        assert (
            await LLM.create(llm_config=settings).ask(ASK, stream=False) == "Hello from us-west-2"
        )
        assert server.requests[0].headers["authorization"].split("/")[2] == "us-west-2"


@pytest.mark.e2e
def test_importing_manus_imports_no_aws_sdk() -> None:
    code = (
        "import sys, app.agent.manus, app.llm.stack, app.llm.bedrock\n"
        "print([m for m in sys.modules if m.split('.')[0] in ('boto3', 'botocore')])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert out.stdout.strip() == "[]"
