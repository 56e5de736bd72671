"""Config loading: defaults, profiles, env expansion, errors that name keys, mcp.json, facade."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from app.config import (
    PROJECT_ROOT,
    AppConfig,
    LLMSettings,
    find_config_path,
    load_config,
)
from app.exceptions import ConfigError
from app.logger import redact

ENV_VARS = (
    "OPENAI_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "OPENMANUS_CONFIG",
    "OPENMANUS_WORKSPACE",
    "EXAMPLE_MCP_TOKEN",
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests must not see the developer's keys or config location."""
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)


def write_config(root: Path, body: str, mcp: str | None = None) -> Path:
    """A project-like layout: <root>/config/config.toml (+ mcp.json)."""
    directory = root / "config"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "config.toml"
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    if mcp is not None:
        (directory / "mcp.json").write_text(textwrap.dedent(mcp), encoding="utf-8")
    return path


def config_error(path: Path) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(path)
    return str(info.value)


MINIMAL = """
[llm]
model = "gpt-4o"
"""


# --- defaults and profiles ------------------------------------------------------------------


def test_defaults(tmp_path: Path) -> None:
    app = load_config(write_config(tmp_path, MINIMAL))
    llm = app.llm["default"]
    assert list(app.llm) == ["default"]
    assert (llm.model, llm.max_tokens, llm.temperature, llm.api_type) == (
        "gpt-4o",
        4096,
        1.0,
        "openai",
    )
    assert (llm.timeout, llm.max_retries, llm.retry_min_wait, llm.retry_max_wait) == (
        300.0,
        5,
        1.0,
        60.0,
    )
    assert llm.api_key is None and llm.base_url is None and llm.max_input_tokens is None
    assert llm.supports_images is None and llm.reasoning_model is None
    assert app.browser_config.headless is None
    assert app.browser_config.max_content_length == 2000
    assert app.browser_config.proxy is None
    assert app.search_config.engine == "Google"
    assert app.search_config.fallback_engines == ["DuckDuckGo", "Baidu", "Bing"]
    assert (app.search_config.retry_delay, app.search_config.max_retries) == (60, 3)
    assert (app.search_config.lang, app.search_config.country) == ("en", "us")
    assert app.sandbox.use_sandbox is False
    assert app.mcp_config.server_reference == "app.mcp.server"
    assert app.mcp_config.servers == {}
    assert app.run_flow_config.use_data_analysis_agent is False
    assert app.workspace_root == PROJECT_ROOT / "workspace"
    assert app.config_path == tmp_path / "config" / "config.toml"


def test_sections_are_read(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        """
        [llm]
        model = "m"
        [browser]
        headless = false
        extra_chromium_args = ["--no-sandbox"]
        [browser.proxy]
        server = "http://proxy:8080"
        username = "me"
        password = "proxy-password-xyz"
        [search]
        engine = "Bing"
        [sandbox]
        use_sandbox = true
        memory_limit = "1g"
        [runflow]
        use_data_analysis_agent = true
        """,
    )
    app = load_config(path)
    assert app.browser_config.headless is False
    assert app.browser_config.extra_chromium_args == ["--no-sandbox"]
    assert app.browser_config.proxy is not None
    assert app.browser_config.proxy.server == "http://proxy:8080"
    assert "proxy-password-xyz" not in repr(app)
    assert redact("pw proxy-password-xyz") == "pw ***"
    assert app.search_config.engine == "Bing"
    assert app.sandbox.use_sandbox is True and app.sandbox.memory_limit == "1g"
    assert app.run_flow_config.use_data_analysis_agent is True


def test_named_profiles_merge_over_llm(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        """
        [llm]
        model = "main-model"
        base_url = "http://127.0.0.1:9/v1"
        api_key = "profile-key-123456"
        max_tokens = 1000
        [llm.vision]
        model = "vision-model"
        temperature = 0.2
        [llm.local]
        api_type = "Ollama"
        base_url = "http://127.0.0.1:11434/v1"
        """,
    )
    app = load_config(path)
    assert set(app.llm) == {"default", "vision", "local"}
    default, vision, local = app.llm["default"], app.llm["vision"], app.llm["local"]
    assert (default.model, default.temperature) == ("main-model", 1.0)
    assert (vision.model, vision.temperature, vision.max_tokens) == ("vision-model", 0.2, 1000)
    assert vision.base_url == "http://127.0.0.1:9/v1"
    assert vision.api_key == "profile-key-123456"
    assert (local.model, local.api_type) == ("main-model", "ollama")
    assert local.base_url == "http://127.0.0.1:11434/v1"
    assert app.get_llm_settings("vision") is vision
    assert app.get_llm_settings() is default


def test_default_table_overlays_default_profile(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        """
        [llm]
        model = "base"
        [llm.default]
        max_tokens = 77
        """,
    )
    app = load_config(path)
    assert set(app.llm) == {"default"}
    assert (app.llm["default"].model, app.llm["default"].max_tokens) == ("base", 77)


def test_unknown_profile_name_is_an_error_with_suggestion(tmp_path: Path) -> None:
    app = load_config(write_config(tmp_path, MINIMAL + "[llm.vision]\nmodel = 'v'\n"))
    with pytest.raises(ConfigError, match=r"'visoin'.*did you mean 'vision'"):
        app.get_llm_settings("visoin")


def test_api_key_hidden_from_repr() -> None:
    settings = LLMSettings(model="m", api_key="repr-hidden-key-1")
    assert "repr-hidden-key-1" not in repr(settings)
    assert "repr-hidden-key-1" not in repr(AppConfig(llm=settings))


# --- environment ----------------------------------------------------------------------------


def test_env_expansion(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OM_TEST_HOST", "127.0.0.1:8123")
    monkeypatch.setenv("OM_TEST_ARG", "--lang=fr")
    monkeypatch.setenv("OM_TEST_EMPTY", "")
    monkeypatch.delenv("OM_TEST_UNSET", raising=False)
    path = write_config(
        tmp_path,
        """
        [llm]
        model = "${OM_TEST_UNSET:-fallback-model}"
        base_url = "http://${OM_TEST_HOST}/v1"
        max_tokens = "${OM_TEST_UNSET:-2048}"
        api_version = "$${NOT_EXPANDED}"
        api_type = "${OM_TEST_EMPTY:-vllm}"
        [browser]
        extra_chromium_args = ["${OM_TEST_ARG}", "--x"]
        """,
    )
    llm = load_config(path).llm["default"]
    assert llm.model == "fallback-model"
    assert llm.base_url == "http://127.0.0.1:8123/v1"
    assert llm.max_tokens == 2048
    assert llm.api_version == "${NOT_EXPANDED}"
    assert llm.api_type == "vllm"  # an empty variable takes the default, like the shell
    app = load_config(path)
    assert app.browser_config.extra_chromium_args == ["--lang=fr", "--x"]


def test_missing_variable_names_key_and_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OM_TEST_MISSING", raising=False)
    path = write_config(
        tmp_path,
        """
        [llm]
        model = "m"
        [llm.vision]
        api_key = "${OM_TEST_MISSING}"
        """,
    )
    message = config_error(path)
    assert "[llm.vision] api_key" in message
    assert "OM_TEST_MISSING" in message
    assert str(path) in message


def test_malformed_reference_is_an_error(tmp_path: Path) -> None:
    message = config_error(write_config(tmp_path, MINIMAL + 'base_url = "${BROKEN"\n'))
    assert "[llm] base_url" in message and "malformed" in message


def test_api_key_falls_back_to_openai_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "env-openai-key-abc123")
    path = write_config(tmp_path, MINIMAL + 'api_key = ""\n[llm.other]\nmodel = "o"\n')
    app = load_config(path)
    assert app.llm["default"].api_key == "env-openai-key-abc123"
    assert app.llm["other"].api_key == "env-openai-key-abc123"
    assert redact("env-openai-key-abc123") == "***"


def test_azure_key_falls_back_to_azure_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "wrong-key-for-azure")
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "azure-env-key-777")
    path = write_config(
        tmp_path,
        """
        [llm]
        model = "deployment"
        api_type = "azure"
        api_version = "2024-10-21"
        base_url = "https://example.openai.azure.com/"
        """,
    )
    assert load_config(path).llm["default"].api_key == "azure-env-key-777"


def test_no_key_anywhere_leaves_none(tmp_path: Path) -> None:
    path = write_config(tmp_path, MINIMAL + 'api_type = "ollama"\n')
    assert load_config(path).llm["default"].api_key is None


def test_explicit_key_wins_over_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "env-key-not-used")
    path = write_config(tmp_path, MINIMAL + 'api_key = "file-key-123456"\n')
    assert load_config(path).llm["default"].api_key == "file-key-123456"


# --- errors ---------------------------------------------------------------------------------


def test_missing_file_says_where_and_how(tmp_path: Path) -> None:
    path = tmp_path / "config" / "config.toml"
    message = config_error(path)
    assert str(path) in message
    assert "config.example.toml" in message
    assert "cp " in message
    assert "OPENAI_API_KEY" in message


def test_never_falls_back_to_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    directory = tmp_path / "config"
    directory.mkdir()
    shutil.copy(PROJECT_ROOT / "config" / "config.example.toml", directory)
    monkeypatch.setenv("OPENAI_API_KEY", "present-key-123456")
    monkeypatch.setenv("OPENMANUS_CONFIG", str(directory / "config.toml"))
    with pytest.raises(ConfigError, match="No configuration file"):
        load_config()


@pytest.mark.parametrize("placeholder", ["YOUR_API_KEY", "sk-...", "your-api-key"])
def test_placeholder_key_is_rejected(tmp_path: Path, placeholder: str) -> None:
    message = config_error(write_config(tmp_path, MINIMAL + f'api_key = "{placeholder}"\n'))
    assert "[llm] api_key" in message
    assert "placeholder" in message


def test_placeholder_in_profile_names_the_profile(tmp_path: Path) -> None:
    path = write_config(tmp_path, MINIMAL + '[llm.vision]\napi_key = "YOUR_API_KEY"\n')
    assert "[llm.vision] api_key" in config_error(path)


def test_bad_toml_names_file_and_line(tmp_path: Path) -> None:
    path = write_config(tmp_path, '[llm]\nmodel = "m"\nmax_tokens = = 3\n')
    message = config_error(path)
    assert str(path) in message
    assert "line 3" in message


def test_wrong_types_name_every_key(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        """
        [llm]
        model = "m"
        api_key = 12345678
        [llm.vision]
        max_tokens = "lots"
        [browser]
        headless = "maybe"
        [browser.proxy]
        username = "u"
        [search]
        fallback_engines = ["Bing", 3]
        """,
    )
    message = config_error(path)
    assert "[llm.vision] max_tokens" in message and "'lots'" in message
    assert "[browser] headless" in message and "'maybe'" in message
    assert "[browser.proxy] server: required but missing" in message
    assert "[search] fallback_engines[1]" in message
    assert "[llm] api_key" in message
    assert "12345678" not in message  # secrets are named, never echoed


def test_out_of_range_values(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        """
        [llm]
        model = "m"
        temperature = 3.5
        max_tokens = 0
        """,
    )
    message = config_error(path)
    assert "[llm] temperature" in message and "3.5" in message
    assert "[llm] max_tokens" in message


def test_retry_waits_must_be_ordered(tmp_path: Path) -> None:
    path = write_config(tmp_path, MINIMAL + "retry_min_wait = 10\nretry_max_wait = 2\n")
    assert "retry_max_wait" in config_error(path)


def test_azure_requires_api_version(tmp_path: Path) -> None:
    path = write_config(tmp_path, MINIMAL + '[llm.az]\napi_type = "azure"\n')
    message = config_error(path)
    assert "[llm.az]" in message and "api_version" in message


def test_llm_section_required(tmp_path: Path) -> None:
    assert "[llm]" in config_error(write_config(tmp_path, "[search]\nengine = 'Bing'\n"))


def test_llm_model_required(tmp_path: Path) -> None:
    message = config_error(write_config(tmp_path, "[llm]\nbase_url = 'http://x'\n"))
    assert "model" in message


def test_section_must_be_a_table(tmp_path: Path) -> None:
    path = write_config(tmp_path, 'browser = "chrome"\n' + MINIMAL)
    assert "browser" in config_error(path)


TYPOS = """
[llm]
model = "m"
max_token = 10
base_ulr = "http://127.0.0.1:9/v1"
[llm.vision]
modle = "v"
[browser]
headles = true
[browser.proxy]
server = "http://p:1"
usernme = "u"
[daytona]
api = 1
[sandbox_]
x = 1
"""


def test_unknown_keys_are_errors_with_suggestions(tmp_path: Path, warnings: list[str]) -> None:
    """A misspelt key would be dropped and its default used instead (base_ulr: the default
    endpoint, waited on for half a minute): each one is an error naming it, every section."""
    path = write_config(tmp_path, TYPOS)
    message = config_error(path)
    assert str(path) in message
    for line in (
        "[llm] max_token: unknown key (did you mean 'max_tokens'?)",
        "[llm] base_ulr: unknown key (did you mean 'base_url'?)",
        "[llm.vision] modle: unknown key (did you mean 'model'?)",
        "[browser] headles: unknown key (did you mean 'headless'?)",
        "[browser.proxy] usernme: unknown key (did you mean 'username'?)",
        "[daytona] api: unknown key",
        "[sandbox_]: unknown key (did you mean 'sandbox'?)",
    ):
        assert f"  - {line}\n" in message + "\n", line
    assert "strict = false" in message  # how to opt out is said where it is needed
    assert warnings == []


def test_misspelt_model_is_named_with_its_suggestion(tmp_path: Path) -> None:
    message = config_error(write_config(tmp_path, '[llm]\nmodle = "m"\n'))
    assert "[llm] modle: unknown key (did you mean 'model'?)" in message
    assert "[llm] has no model" in message


def test_strict_false_turns_unknown_keys_into_one_warning(
    tmp_path: Path, warnings: list[str]
) -> None:
    path = write_config(tmp_path, "strict = false\n" + TYPOS)
    app = load_config(path)
    assert app.llm["default"].max_tokens == 4096
    assert app.llm["default"].base_url is None  # the misspelt key was ignored, as warnings
    (warning,) = warnings
    assert str(path) in warning
    assert "[llm] max_token (did you mean 'max_tokens'?)" in warning
    assert "[llm] base_ulr (did you mean 'base_url'?)" in warning
    assert "[browser] headles (did you mean 'headless'?)" in warning
    assert "[daytona] api" in warning


def test_strict_false_still_names_a_misspelt_model(tmp_path: Path, warnings: list[str]) -> None:
    message = config_error(write_config(tmp_path, 'strict = false\n[llm]\nmodle = "m"\n'))
    assert "[llm] has no model ([llm] modle looks like a misspelt model)" in message
    assert any("modle (did you mean 'model'?)" in w for w in warnings)


def test_strict_must_be_a_boolean(tmp_path: Path) -> None:
    message = config_error(write_config(tmp_path, 'strict = "no"\n' + MINIMAL))
    assert "strict: must be true or false, got 'no'" in message


def test_strict_true_is_the_default_spelt_out(tmp_path: Path) -> None:
    assert load_config(write_config(tmp_path, "strict = true\n" + MINIMAL)).llm
    message = config_error(write_config(tmp_path, "strict = true\n" + MINIMAL + "tmperature = 1\n"))
    assert "[llm] tmperature: unknown key (did you mean 'temperature'?)" in message


def test_value_error_shows_the_value_once(tmp_path: Path) -> None:
    message = config_error(
        write_config(tmp_path, '[llm]\nmodel = "m"\nbase_url = "127.0.0.1:9/v1"\n')
    )
    assert message.count("127.0.0.1:9/v1") == 1
    assert "[llm] base_url: must be a full URL" in message


def test_known_keys_do_not_warn(tmp_path: Path, warnings: list[str]) -> None:
    path = write_config(tmp_path, MINIMAL + "[browser.proxy]\nserver = 'http://p:1'\n")
    load_config(path)
    assert warnings == []


# --- the shipped examples -------------------------------------------------------------------


def test_example_files_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    directory = tmp_path / "config"
    directory.mkdir()
    shutil.copy(PROJECT_ROOT / "config" / "config.example.toml", directory / "config.toml")
    shutil.copy(PROJECT_ROOT / "config" / "mcp.example.json", directory / "mcp.json")
    monkeypatch.setenv("OPENAI_API_KEY", "example-env-key-42")
    app = load_config(directory / "config.toml")
    assert app.llm["default"].model
    assert app.llm["default"].api_key == "example-env-key-42"
    kinds = {server.type for server in app.mcp_config.servers.values()}
    assert kinds == {"stdio", "sse", "http"}


def test_example_without_env_key_names_the_variable(tmp_path: Path) -> None:
    directory = tmp_path / "config"
    directory.mkdir()
    shutil.copy(PROJECT_ROOT / "config" / "config.example.toml", directory / "config.toml")
    message = config_error(directory / "config.toml")
    assert "[llm] api_key" in message and "OPENAI_API_KEY" in message


# --- mcp.json -------------------------------------------------------------------------------


def test_mcp_servers_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OM_TEST_TOKEN", "mcp-token-value-555")
    path = write_config(
        tmp_path,
        MINIMAL,
        mcp="""
        {"mcpServers": {
            "local": {"command": "python", "args": ["-m", "srv"],
                      "env": {"API_TOKEN": "${OM_TEST_TOKEN}", "PORT": 8080}},
            "events": {"url": "http://127.0.0.1:8000/sse"},
            "stream": {"type": "streamable-http", "url": "http://127.0.0.1:8000/mcp",
                       "headers": {"Authorization": "Bearer ${OM_TEST_TOKEN}"}}
        }}
        """,
    )
    servers = load_config(path).mcp_config.servers
    assert servers["local"].type == "stdio"
    assert servers["local"].args == ["-m", "srv"]
    assert servers["local"].env == {"API_TOKEN": "mcp-token-value-555", "PORT": "8080"}
    assert servers["events"].type == "sse"
    assert servers["stream"].type == "http"
    assert servers["stream"].headers["Authorization"] == "Bearer mcp-token-value-555"
    assert "mcp-token-value-555" not in repr(servers)
    assert redact("t=mcp-token-value-555") == "t=***"


def test_mcp_missing_file_means_no_servers(tmp_path: Path) -> None:
    assert load_config(write_config(tmp_path, MINIMAL)).mcp_config.servers == {}


def test_mcp_broken_json_names_file_and_line(tmp_path: Path) -> None:
    path = write_config(tmp_path, MINIMAL, mcp='{\n  "mcpServers": {\n    "a": {,}\n  }\n}\n')
    message = config_error(path)
    assert str(tmp_path / "config" / "mcp.json") in message
    assert "line 3" in message


def test_mcp_server_needs_command_or_url(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        MINIMAL,
        mcp='{"mcpServers": {"a": {"type": "stdio"}, "b": {"type": "sse"}, "c": {"args": []}}}',
    )
    message = config_error(path)
    assert "mcpServers.a" in message and "command" in message
    assert "mcpServers.b" in message and "url" in message
    assert "mcpServers.c" in message


def test_mcp_unknown_type_is_an_error(tmp_path: Path) -> None:
    path = write_config(
        tmp_path, MINIMAL, mcp='{"mcpServers": {"a": {"type": "carrier-pigeon", "url": "x"}}}'
    )
    message = config_error(path)
    assert "mcpServers.a.type" in message and "carrier-pigeon" in message


def test_mcp_unknown_keys_warn(tmp_path: Path, warnings: list[str]) -> None:
    path = write_config(
        tmp_path, MINIMAL, mcp='{"mcpServers": {"a": {"command": "x", "comand": "y"}}}'
    )
    load_config(path)
    assert any("mcpServers.a.comand" in w and "'command'" in w for w in warnings)


# --- where the file is found ----------------------------------------------------------------


def test_find_config_path_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert find_config_path() == PROJECT_ROOT / "config" / "config.toml"
    env_path = tmp_path / "env.toml"
    monkeypatch.setenv("OPENMANUS_CONFIG", str(env_path))
    assert find_config_path() == env_path
    explicit = tmp_path / "explicit.toml"
    assert find_config_path(explicit) == explicit
    assert find_config_path(tmp_path) == tmp_path / "config.toml"  # a directory


def test_openmanus_config_env_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_config(tmp_path, '[llm]\nmodel = "from-env-file"\n')
    monkeypatch.setenv("OPENMANUS_CONFIG", str(path))
    assert load_config().llm["default"].model == "from-env-file"
    assert load_config().config_path == path


# --- workspace_root -------------------------------------------------------------------------


def test_workspace_root_relative_to_project_of_config(tmp_path: Path) -> None:
    app = load_config(write_config(tmp_path, 'workspace_root = "my-ws"\n' + MINIMAL))
    assert app.workspace_root == tmp_path / "my-ws"


def test_workspace_root_absolute(tmp_path: Path) -> None:
    target = tmp_path / "abs"
    app = load_config(write_config(tmp_path, f'workspace_root = "{target}"\n' + MINIMAL))
    assert app.workspace_root == target


def test_workspace_env_overrides_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENMANUS_WORKSPACE", str(tmp_path / "env-ws"))
    app = load_config(write_config(tmp_path, 'workspace_root = "my-ws"\n' + MINIMAL))
    assert app.workspace_root == tmp_path / "env-ws"


# --- hostile files: bounded time, one clear error ---------------------------------------------


def _base_config(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "config.toml"
    path.write_text('[llm]\nmodel = "m"\napi_key = "k"\n' + extra)
    return path


@pytest.mark.parametrize(
    "nesting",
    [
        "deep = " + "[" * 50_000 + "]" * 50_000 + "\n",  # RecursionError inside tomllib
        "deep = " + "[" * 200 + "]" * 200 + "\n",  # parses, but nothing valid nests so deep
        "[" + ".".join(f"t{n}" for n in range(2000)) + "]\nx = 1\n",  # dotted tables
        "deep = " + "{a = " * 500 + "1" + "}" * 500 + "\n",
    ],
)
def test_deeply_nested_config_is_a_clear_error(tmp_path: Path, nesting: str) -> None:
    path = _base_config(tmp_path, nesting)
    with pytest.raises(ConfigError, match=r"config\.toml is nested too deeply"):
        load_config(path)


def test_huge_config_is_refused_before_parsing(tmp_path: Path) -> None:
    import time

    path = _base_config(tmp_path)
    with path.open("ab") as fh:  # 107 MB of comments, written sparse-free but fast
        block = b"# " + b"x" * (1 << 20) + b"\n"
        for _ in range(107):
            fh.write(block)
    started = time.monotonic()
    with pytest.raises(ConfigError, match=r"config file too large \(112 MB, limit 4 MB\)"):
        load_config(path)
    assert time.monotonic() - started < 2


def test_hostile_mcp_json_is_a_clear_error(tmp_path: Path) -> None:
    path = _base_config(tmp_path)
    mcp = tmp_path / "mcp.json"
    mcp.write_text('{"mcpServers": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(ConfigError, match=r"mcp\.json is nested too deeply"):
        load_config(path)
    mcp.write_text('{"mcpServers": {}, "pad": "' + "x" * (5 << 20) + '"}')
    with pytest.raises(ConfigError, match="config file too large"):
        load_config(path)


def test_every_name_has_one_import_path() -> None:
    """``app.config`` is where every settings class is imported from; the modules that once
    held them too (``app.config_models``, ``app.config_sections``...) are gone."""
    import importlib

    import app.config

    for name in app.config.__all__:
        assert getattr(app.config, name) is not None
    for old in ("models", "sections", "files", "env", "report"):
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(f"app.config_{old}")
    with pytest.raises(AttributeError, match="NoSuchSettings"):
        _ = app.config.NoSuchSettings  # type: ignore[attr-defined]
