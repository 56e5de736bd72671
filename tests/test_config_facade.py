"""The lazy ``config`` facade: loading on first use, ``use()``/``reset()``, the workspace and
tool sections without a config file, and that importing reads nothing."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pydantic import ValidationError

from app.config import PROJECT_ROOT, AppConfig, Config, LLMSettings, load_config
from app.exceptions import ConfigError
from app.logger import redact
from tests.test_config import MINIMAL, clean_env, write_config

__all__ = ["clean_env"]  # the autouse fixture, shared with test_config.py


def test_facade_workspace_without_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENMANUS_CONFIG", str(tmp_path / "absent.toml"))
    facade = Config()
    assert facade.workspace_root == PROJECT_ROOT / "workspace"
    monkeypatch.setenv("OPENMANUS_WORKSPACE", str(tmp_path / "env-ws"))
    assert facade.workspace_root == tmp_path / "env-ws"
    assert not facade.is_loaded
    assert not (tmp_path / "env-ws").exists()  # nothing is created


def test_facade_workspace_from_file_even_if_llm_is_unusable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The LLM part needs a variable that is not set, but tools only need the workspace.
    path = write_config(
        tmp_path, 'workspace_root = "ws"\n[llm]\nmodel = "m"\napi_key = "${OM_TEST_NOPE}"\n'
    )
    monkeypatch.delenv("OM_TEST_NOPE", raising=False)
    monkeypatch.setenv("OPENMANUS_CONFIG", str(path))
    facade = Config()
    assert facade.workspace_root == tmp_path / "ws"
    with pytest.raises(ConfigError, match="OM_TEST_NOPE"):
        _ = facade.llm


# --- the facade -----------------------------------------------------------------------------


@pytest.mark.e2e
def test_import_and_construction_read_nothing(tmp_path: Path) -> None:
    path = write_config(tmp_path, MINIMAL)
    code = textwrap.dedent(
        """
        import sys
        opened = []
        def hook(event, args):
            if event == "open" and isinstance(args[0], str):
                opened.append(args[0])
        sys.addaudithook(hook)
        import app.config
        facade = app.config.Config()
        before = [p for p in opened if p.endswith((".toml", ".json"))]
        loaded = app.config.config.is_loaded or facade.is_loaded
        model = facade.llm["default"].model
        after = [p for p in opened if p.endswith((".toml", ".json"))]
        print(before, loaded, model, len(after) > 0)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=PROJECT_ROOT,
        env={"OPENMANUS_CONFIG": str(path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["[]", "False", "gpt-4o", "True"]
    assert not (tmp_path / "logs").exists()


def test_facade_loads_lazily_and_does_not_cache_failures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "config" / "config.toml"
    monkeypatch.setenv("OPENMANUS_CONFIG", str(path))
    facade = Config()
    assert not facade.is_loaded
    with pytest.raises(ConfigError, match="No configuration file"):
        _ = facade.llm
    write_config(tmp_path, '[llm]\nmodel = "later"\n[search]\nengine = "Bing"\n')
    assert facade.llm["default"].model == "later"
    assert facade.is_loaded
    assert facade.search_config.engine == "Bing"
    assert facade.browser_config.max_content_length == 2000
    assert facade.sandbox.use_sandbox is False
    assert facade.mcp_config.servers == {}
    assert facade.run_flow_config.use_data_analysis_agent is False
    assert facade.root_path == PROJECT_ROOT
    assert facade.config_path == path


def test_facade_load_and_reset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENMANUS_CONFIG", str(tmp_path / "absent.toml"))
    first = write_config(tmp_path / "a", '[llm]\nmodel = "a"\n')
    facade = Config()
    app = facade.load(first)
    assert app.llm["default"].model == "a"
    assert facade.llm["default"].model == "a"
    assert facade.workspace_root == PROJECT_ROOT / "workspace"
    facade.reset()
    assert not facade.is_loaded
    with pytest.raises(ConfigError):
        _ = facade.llm  # falls back to $OPENMANUS_CONFIG, which is absent


def test_facade_use_installs_code_built_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENMANUS_CONFIG", str(tmp_path / "absent.toml"))
    facade = Config()
    app = AppConfig(
        llm={"default": LLMSettings(model="code-model", api_key="code-built-key-321")},
        workspace_root=tmp_path / "code-ws",
    )
    facade.use(app)
    assert facade.llm["default"].model == "code-model"
    assert facade.workspace_root == tmp_path / "code-ws"
    assert facade.config_path is None
    assert redact("code-built-key-321") == "***"
    with pytest.raises(TypeError):
        facade.use({"llm": {}})  # type: ignore[arg-type]
    facade.use(LLMSettings(model="just-llm"))  # the short form in docs/configuration.md
    assert facade.llm["default"].model == "just-llm" and facade.config_path is None


def test_app_config_requires_default_profile() -> None:
    with pytest.raises(ValidationError, match="default"):
        AppConfig(llm={"other": LLMSettings(model="m")})
    assert AppConfig(llm=LLMSettings(model="solo")).llm["default"].model == "solo"


def test_mcp_json_is_only_read_next_to_the_config(tmp_path: Path) -> None:
    path = write_config(tmp_path, MINIMAL)
    servers = {"mcpServers": {"a": {"command": "x"}}}
    (tmp_path / "mcp.json").write_text(json.dumps(servers), encoding="utf-8")
    assert load_config(path).mcp_config.servers == {}
    (path.parent / "mcp.json").write_text(json.dumps(servers), encoding="utf-8")
    assert list(load_config(path).mcp_config.servers) == ["a"]


def test_tool_sections_default_without_a_config_file_but_report_a_broken_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENMANUS_CONFIG", str(tmp_path / "absent.toml"))
    facade = Config()
    browser = facade.section_or_default("browser_config")
    assert browser.max_content_length == 2000 and not facade.is_loaded
    assert facade.section_or_default("sandbox").backend in (None, "local")
    with pytest.raises(ConfigError, match="No configuration file"):
        _ = facade.llm  # the LLM still needs real settings
    broken = tmp_path / "broken.toml"
    broken.write_text("[browser]\nheadless = 'maybe'\n", encoding="utf-8")
    monkeypatch.setenv("OPENMANUS_CONFIG", str(broken))
    with pytest.raises(ConfigError):
        Config().section_or_default("browser_config")
