"""Drop-in for upstream OpenManus (commit 52a13f2): its module paths and public names import,
and programs written like its entry points (tests/upstream_programs/) run unchanged against
the scripted LLM server."""

from __future__ import annotations

import ast
import asyncio
import importlib
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from app.exceptions import (
    ConfigError,
    SandboxError,
    SandboxResourceError,
    SandboxTimeoutError,
    ToolError,
    UnsupportedFeatureError,
)
from tests.test_main_e2e import child_env
from tests.web_fixtures import WebServer

ROOT = Path(__file__).resolve().parent.parent

#: Every module of upstream's app/ package and the public names it defines at module level
#: (classes, functions, constants, ``__all__``), read from upstream's tree at commit 52a13f2.
#: Its two demo scripts (``app.tool.chart_visualization.test.*``) are scripts, not library
#: code: they live in scripts/examples/ (tests/test_data_analysis.py runs them).
UPSTREAM_NAMES: dict[str, tuple[str, ...]] = {
    "app": (),
    "app.agent": (
        "BaseAgent",
        "BrowserAgent",
        "MCPAgent",
        "ReActAgent",
        "SWEAgent",
        "ToolCallAgent",
    ),
    "app.agent.base": ("BaseAgent",),
    "app.agent.browser": ("BrowserAgent", "BrowserContextHelper"),
    "app.agent.data_analysis": ("DataAnalysis",),
    "app.agent.manus": ("Manus",),
    "app.agent.mcp": ("MCPAgent",),
    "app.agent.react": ("ReActAgent",),
    "app.agent.sandbox_agent": ("SandboxManus",),
    "app.agent.swe": ("SWEAgent",),
    "app.agent.toolcall": ("TOOL_CALL_REQUIRED", "ToolCallAgent"),
    "app.bedrock": (
        "BedrockClient",
        "CURRENT_TOOLUSE_ID",
        "Chat",
        "ChatCompletions",
        "OpenAIResponse",
    ),
    "app.config": (
        "AppConfig",
        "BrowserSettings",
        "Config",
        "DaytonaSettings",
        "LLMSettings",
        "MCPServerConfig",
        "MCPSettings",
        "PROJECT_ROOT",
        "ProxySettings",
        "RunflowSettings",
        "SandboxSettings",
        "SearchSettings",
        "WORKSPACE_ROOT",
        "config",
        "get_project_root",
    ),
    "app.daytona.sandbox": (
        "create_sandbox",
        "daytona",
        "daytona_config",
        "daytona_settings",
        "delete_sandbox",
        "get_or_start_sandbox",
        "start_supervisord_session",
    ),
    "app.daytona.tool_base": (
        "SandboxToolsBase",
        "ThreadMessage",
        "daytona",
        "daytona_config",
        "daytona_settings",
    ),
    "app.exceptions": ("OpenManusError", "TokenLimitExceeded", "ToolError"),
    "app.flow": (),
    "app.flow.base": ("BaseFlow",),
    "app.flow.flow_factory": ("FlowFactory", "FlowType"),
    "app.flow.planning": ("PlanStepStatus", "PlanningFlow"),
    "app.llm": ("LLM", "MULTIMODAL_MODELS", "REASONING_MODELS", "TokenCounter"),
    "app.logger": ("define_log_level", "logger"),
    "app.mcp": (),
    "app.mcp.server": ("MCPServer", "parse_args"),
    "app.prompt": (),
    "app.prompt.browser": ("NEXT_STEP_PROMPT", "SYSTEM_PROMPT"),
    "app.prompt.manus": ("NEXT_STEP_PROMPT", "SYSTEM_PROMPT"),
    "app.prompt.mcp": (
        "MULTIMEDIA_RESPONSE_PROMPT",
        "NEXT_STEP_PROMPT",
        "SYSTEM_PROMPT",
        "TOOL_ERROR_PROMPT",
    ),
    "app.prompt.planning": ("NEXT_STEP_PROMPT", "PLANNING_SYSTEM_PROMPT"),
    "app.prompt.swe": ("SYSTEM_PROMPT",),
    "app.prompt.toolcall": ("NEXT_STEP_PROMPT", "SYSTEM_PROMPT"),
    "app.prompt.visualization": ("NEXT_STEP_PROMPT", "SYSTEM_PROMPT"),
    "app.sandbox": (
        "BaseSandboxClient",
        "DockerSandbox",
        "LocalSandboxClient",
        "SandboxError",
        "SandboxManager",
        "SandboxResourceError",
        "SandboxTimeoutError",
        "create_sandbox_client",
    ),
    "app.sandbox.client": (
        "BaseSandboxClient",
        "LocalSandboxClient",
        "SANDBOX_CLIENT",
        "SandboxFileOperations",
        "create_sandbox_client",
    ),
    "app.sandbox.core.exceptions": ("SandboxError", "SandboxResourceError", "SandboxTimeoutError"),
    "app.sandbox.core.manager": ("SandboxManager",),
    "app.sandbox.core.sandbox": ("DockerSandbox",),
    "app.sandbox.core.terminal": ("AsyncDockerizedTerminal", "DockerSession"),
    "app.schema": (
        "AgentState",
        "Function",
        "Memory",
        "Message",
        "ROLE_TYPE",
        "ROLE_VALUES",
        "Role",
        "TOOL_CHOICE_TYPE",
        "TOOL_CHOICE_VALUES",
        "ToolCall",
        "ToolChoice",
    ),
    "app.tool": (
        "BaseTool",
        "Bash",
        "BrowserUseTool",
        "Crawl4aiTool",
        "CreateChatCompletion",
        "PlanningTool",
        "StrReplaceEditor",
        "Terminate",
        "ToolCollection",
        "WebSearch",
    ),
    "app.tool.ask_human": ("AskHuman",),
    "app.tool.base": ("BaseTool", "CLIResult", "ToolFailure", "ToolResult"),
    "app.tool.bash": ("Bash",),
    "app.tool.browser_use_tool": ("BrowserUseTool", "Context"),
    "app.tool.chart_visualization": (
        "DataVisualization",
        "NormalPythonExecute",
        "VisualizationPrepare",
    ),
    "app.tool.chart_visualization.chart_prepare": ("VisualizationPrepare",),
    "app.tool.chart_visualization.data_visualization": ("DataVisualization",),
    "app.tool.chart_visualization.python_execute": ("NormalPythonExecute",),
    "app.tool.computer_use_tool": ("ComputerUseTool", "KEYBOARD_KEYS", "MOUSE_BUTTONS"),
    "app.tool.crawl4ai": ("Crawl4aiTool",),
    "app.tool.create_chat_completion": ("CreateChatCompletion",),
    "app.tool.file_operators": (
        "FileOperator",
        "LocalFileOperator",
        "PathLike",
        "SandboxFileOperator",
    ),
    "app.tool.mcp": ("MCPClientTool", "MCPClients"),
    "app.tool.planning": ("PlanningTool",),
    "app.tool.python_execute": ("PythonExecute",),
    "app.tool.sandbox.sb_browser_tool": ("SandboxBrowserTool",),
    "app.tool.sandbox.sb_files_tool": ("Context", "SandboxFilesTool"),
    "app.tool.sandbox.sb_shell_tool": ("Context", "SandboxShellTool"),
    "app.tool.sandbox.sb_vision_tool": (
        "DEFAULT_JPEG_QUALITY",
        "DEFAULT_MAX_HEIGHT",
        "DEFAULT_MAX_WIDTH",
        "DEFAULT_PNG_COMPRESS_LEVEL",
        "MAX_COMPRESSED_SIZE",
        "MAX_IMAGE_SIZE",
        "SandboxVisionTool",
    ),
    "app.tool.search": (
        "BaiduSearchEngine",
        "BingSearchEngine",
        "DuckDuckGoSearchEngine",
        "GoogleSearchEngine",
        "WebSearchEngine",
    ),
    "app.tool.search.baidu_search": ("BaiduSearchEngine",),
    "app.tool.search.base": ("SearchItem", "WebSearchEngine"),
    "app.tool.search.bing_search": (
        "ABSTRACT_MAX_LENGTH",
        "BING_HOST_URL",
        "BING_SEARCH_URL",
        "BingSearchEngine",
        "HEADERS",
        "USER_AGENTS",
    ),
    "app.tool.search.duckduckgo_search": ("DuckDuckGoSearchEngine",),
    "app.tool.search.google_search": ("GoogleSearchEngine",),
    "app.tool.str_replace_editor": (
        "Command",
        "MAX_RESPONSE_LEN",
        "SNIPPET_LINES",
        "StrReplaceEditor",
        "TRUNCATED_MESSAGE",
        "maybe_truncate",
    ),
    "app.tool.terminate": ("Terminate",),
    "app.tool.tool_collection": ("ToolCollection",),
    "app.tool.web_search": (
        "SearchMetadata",
        "SearchResponse",
        "SearchResult",
        "WebContentFetcher",
        "WebSearch",
    ),
    "app.utils": (),
    "app.utils.files_utils": (
        "EXCLUDED_DIRS",
        "EXCLUDED_EXT",
        "EXCLUDED_FILES",
        "clean_path",
        "should_exclude_file",
    ),
    "app.utils.logger": ("ENV_MODE", "logger", "renderer"),
}


@pytest.mark.parametrize("module", sorted(UPSTREAM_NAMES))
def test_upstream_module_and_its_names_import(module: str) -> None:
    imported = importlib.import_module(module)
    missing = [name for name in UPSTREAM_NAMES[module] if not hasattr(imported, name)]
    assert not missing, f"{module} lacks {missing}"


def python_child(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``code`` run by a fresh interpreter in this checkout."""
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=child_env(tmp_path),
        cwd=ROOT,
        timeout=120,
    )


@pytest.mark.e2e
def test_importing_every_upstream_module_loads_no_heavy_dependency(tmp_path: Path) -> None:
    # The aliases must stay cheap: no SDK, browser, Docker or MCP import just for a name.
    code = (
        "import importlib, json, sys\n"
        f"for m in {sorted(UPSTREAM_NAMES)!r}:\n"
        "    importlib.import_module(m)\n"
        "heavy = ('openai', 'browser_use', 'docker', 'mcp', 'matplotlib', 'pandas', 'httpx',"
        " 'crawl4ai', 'daytona', 'boto3')\n"
        "print(json.dumps(sorted(h for h in heavy if h in sys.modules)))\n"
    )
    proc = python_child(code, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == []


def test_aliases_are_our_objects_not_copies() -> None:
    from app.flow.factory import FlowFactory
    from app.flow.flow_factory import FlowFactory as UpstreamFlowFactory
    from app.llm import TokenCounter
    from app.sandbox import SandboxError as PackageSandboxError
    from app.tokens import TokenCounter as OurTokenCounter
    from app.tool import Crawl4aiTool
    from app.tool.chart.tools import DataVisualization
    from app.tool.chart_visualization.data_visualization import (
        DataVisualization as UpstreamDataVisualization,
    )
    from app.tool.search.google import GoogleSearchEngine
    from app.tool.search.google_search import GoogleSearchEngine as UpstreamGoogle

    assert UpstreamFlowFactory is FlowFactory
    assert UpstreamDataVisualization is DataVisualization
    assert UpstreamGoogle is GoogleSearchEngine
    assert TokenCounter is OurTokenCounter
    assert PackageSandboxError is SandboxError
    assert Crawl4aiTool().name == "crawl4ai"


def test_model_lists_answer_membership_by_our_rules() -> None:
    from app.llm import MULTIMODAL_MODELS, REASONING_MODELS

    assert "o3-mini" in REASONING_MODELS and "o1" in REASONING_MODELS
    assert "gpt-4o" not in REASONING_MODELS and 42 not in REASONING_MODELS
    assert "gpt-4o-mini" in MULTIMODAL_MODELS and "openai/gpt-4o" in MULTIMODAL_MODELS
    assert "gpt-3.5-turbo" not in MULTIMODAL_MODELS
    assert "o1" in list(REASONING_MODELS)


def test_workspace_root_follows_the_active_config(tmp_path: Path, monkeypatch) -> None:
    import app.config as config_module

    monkeypatch.setenv("OPENMANUS_WORKSPACE", str(tmp_path / "elsewhere"))
    assert config_module.WORKSPACE_ROOT == tmp_path / "elsewhere"
    assert config_module.get_project_root() == config_module.PROJECT_ROOT == ROOT


# --- the compatibility layer: one package, re-exported at upstream's paths, never imported ----

MARKER = "Upstream compatibility:"
LAYER = "app.compat"


def compat_layer() -> list[str]:
    """The modules pyproject's forbidden contract keeps away from the core."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (contract,) = (
        c
        for c in config["tool"]["importlinter"]["contracts"]
        if c["name"] == "The core never imports the upstream compatibility layer"
    )
    assert contract["source_modules"] == ["app", "app.**"]
    found: list[str] = []
    for expression in contract["forbidden_modules"]:
        base = expression.removesuffix(".**")
        path = ROOT / Path(*base.split("."))
        if expression.endswith(".**"):
            found += [
                module_of(p)
                for p in sorted(path.rglob("*.py"))
                if p.parent != path or p.name != "__init__.py"
            ]
        else:
            found.append(base)
    return found


def module_of(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def source_of(module: str) -> Path:
    path = ROOT / Path(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def first_line(module: str) -> str:
    tree = ast.parse(source_of(module).read_text())
    return next(iter((ast.get_docstring(tree) or "").splitlines()), "")


def all_modules() -> list[str]:
    return sorted(module_of(p) for p in (ROOT / "app").rglob("*.py"))


def is_upstream_path(module: str) -> bool:
    """One of upstream's module paths, or a package holding some."""
    return module in UPSTREAM_NAMES or any(m.startswith(module + ".") for m in UPSTREAM_NAMES)


def in_layer(module: str) -> bool:
    return module == LAYER or module.startswith(LAYER + ".")


def test_the_compatibility_layer_is_one_package_organized_like_upstream() -> None:
    layer = [m for m in all_modules() if in_layer(m)]
    unmarked = [m for m in layer if not first_line(m).startswith(MARKER)]
    assert not unmarked, f"first docstring line should say {MARKER!r}: {unmarked}"
    # app.compat.sandbox.core.terminal is upstream's app.sandbox.core.terminal, and so on.
    mirrored = {m: "app" + m.removeprefix(LAYER) for m in layer if m != LAYER}
    assert [m for m, upstream in mirrored.items() if not is_upstream_path(upstream)] == []


def test_upstream_paths_that_are_not_ours_only_re_export_the_layer() -> None:
    """Outside app.compat, a module marked as compatibility is a docstring, imports from the
    module of the same path in app.compat, and ``__all__``: nothing else."""
    stubs = [m for m in all_modules() if not in_layer(m) and first_line(m).startswith(MARKER)]
    assert "app.sandbox.core.terminal" in stubs and "app.flow.flow_factory" in stubs
    for module in stubs:
        source = source_of(module).read_text()
        body = ast.parse(source).body
        docstring, *rest = body
        assert isinstance(docstring, ast.Expr) and isinstance(docstring.value, ast.Constant)
        assert len(source.splitlines()) <= 25, f"{module}: more than a few lines"
        mirror = LAYER + module.removeprefix("app")
        imported: set[str] = set()
        exported: list[str] = []
        for node in rest:
            if isinstance(node, ast.ImportFrom):
                assert node.module == mirror and node.level == 0, f"{module} imports {node.module}"
                imported |= {alias.asname or alias.name for alias in node.names}
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                assert [getattr(t, "id", None) for t in targets] == ["__all__"], module
                assert node.value is not None
                exported = ast.literal_eval(node.value)
            else:
                raise AssertionError(f"{module}: {ast.dump(node)[:80]} is more than a re-export")
        # Every name imported is given, and every name given is imported (or, where the layer
        # reads it on first use, served by the layer's module __getattr__).
        assert imported - {"__getattr__"} <= set(exported), module
        lazy = set(exported) - imported
        assert not lazy or "__getattr__" in imported, f"{module} lacks {sorted(lazy)}"
        imported_module = importlib.import_module(module)
        assert imported_module.__all__ == importlib.import_module(mirror).__all__ or not exported


def test_the_compatibility_layer_is_what_its_docstrings_say() -> None:
    layer = compat_layer()
    assert LAYER in layer and "app.compat.sandbox.core.terminal" in layer
    # Every listed module says first what it is...
    unmarked = [m for m in layer if not first_line(m).startswith(MARKER)]
    assert not unmarked, f"first docstring line should say {MARKER!r}: {unmarked}"
    # ... and every module that says so is listed, so the linter keeps the core off it.
    marked = {m for m in all_modules() if first_line(m).startswith(MARKER)}
    assert sorted(marked - set(layer)) == []
    # Outside the package, each is one of upstream's paths (or a package holding them).
    assert [m for m in layer if not in_layer(m) and not is_upstream_path(m)] == []


@pytest.mark.e2e
def test_each_compatibility_module_imports_first(tmp_path: Path) -> None:
    # A module of the layer imported before anything else of ours finds no circle (a core
    # package's __init__ gives upstream's names from the layer on first use, not at import).
    modules = compat_layer()
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}:\n"
        "    for k in [k for k in sys.modules if k == 'app' or k.startswith('app.')]:\n"
        "        del sys.modules[k]\n"
        "    importlib.import_module(m)\n"
    )
    proc = python_child(code, tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]


# --- what we cannot provide fails once, clearly ----------------------------------------------


def test_daytona_names_import_but_every_use_says_what_is_needed() -> None:
    from app.daytona import sandbox as daytona_sandbox
    from app.daytona.tool_base import SandboxToolsBase, ThreadMessage
    from app.tool.computer_use_tool import ComputerUseTool
    from app.tool.sandbox.sb_browser_tool import SandboxBrowserTool
    from app.tool.sandbox.sb_files_tool import SandboxFilesTool
    from app.tool.sandbox.sb_shell_tool import SandboxShellTool
    from app.tool.sandbox.sb_vision_tool import SandboxVisionTool

    attempts = [
        lambda: daytona_sandbox.create_sandbox(password="x"),
        lambda: daytona_sandbox.start_supervisord_session(None),
        lambda: asyncio.run(daytona_sandbox.delete_sandbox("id")),
        lambda: asyncio.run(daytona_sandbox.get_or_start_sandbox("id")),
        lambda: daytona_sandbox.daytona.get("id"),
        lambda: daytona_sandbox.daytona_config(),
        *(
            cls
            for cls in (
                SandboxToolsBase,
                SandboxBrowserTool,
                SandboxFilesTool,
                SandboxShellTool,
                SandboxVisionTool,
                ComputerUseTool,
            )
        ),
    ]
    for attempt in attempts:
        with pytest.raises(UnsupportedFeatureError) as caught:
            attempt()
        message = str(caught.value)
        assert "Daytona" in message and "daytona_api_key" in message
        assert 'backend = "docker"' in message  # and what to use instead
    assert ThreadMessage("user", {"text": "hi"}).to_dict()["metadata"] == {}


def test_upstream_terminal_without_an_engine_is_a_clear_error(monkeypatch, tmp_path) -> None:
    pytest.importorskip("docker")
    from app.exceptions import SandboxUnavailableError
    from app.sandbox.core.terminal import AsyncDockerizedTerminal

    # (the terminal itself, on a real engine: tests/test_sandbox_docker_api.py)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    with pytest.raises(SandboxUnavailableError, match="no Docker engine is reachable"):
        AsyncDockerizedTerminal("container-id")


# --- config: refused at load, with the profile and the value named ---------------------------


def load(tmp_path: Path, body: str):
    from app.config import load_config

    path = tmp_path / "config.toml"
    path.write_text(body)
    return load_config(path)


def config_error(tmp_path: Path, body: str) -> str:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, body)
    return str(caught.value)


def test_aws_api_type_loads_with_a_scheme_less_base_url(tmp_path: Path) -> None:
    # Upstream's example: a Bedrock host without a scheme (tests/test_llm_stack.py: the rest).
    settings = load(
        tmp_path,
        (
            '[llm]\nmodel = "m"\n[llm.bedrock]\napi_type = "aws"\n'
            'model = "us.anthropic.claude-3-7-sonnet-20250219-v1:0"\n'
            'base_url = "bedrock-runtime.us-west-2.amazonaws.com"\n'
        ),
    ).llm["bedrock"]
    assert settings.api_type == "aws"
    assert settings.base_url == "https://bedrock-runtime.us-west-2.amazonaws.com"


@pytest.mark.parametrize("url", ["llm.example.invalid/v1", "localhost:11434/v1", "ftp://x/v1"])
def test_base_url_without_http_scheme_is_refused_at_load(tmp_path: Path, url: str) -> None:
    message = config_error(tmp_path, f'[llm]\nmodel = "m"\n[llm.fast]\nbase_url = "{url}"\n')
    assert "[llm.fast] base_url" in message and repr(url) in message
    assert "http://" in message


def test_base_url_with_scheme_loads(tmp_path: Path) -> None:
    app_config = load(tmp_path, '[llm]\nmodel = "m"\nbase_url = "HTTPS://api.example.com/v1"\n')
    assert app_config.llm["default"].base_url == "HTTPS://api.example.com/v1"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("api_key", "your Jiekou.AI api key"),
        ("api_key", "your ppio api key"),
        ("api_key", "YOUR_API_KEY"),
        ("api_key", "<your-openrouter-key>"),
        ("api_version", "AZURE API VERSION"),
        ("base_url", "{YOUR_AZURE_ENDPOINT.rstrip('/')}/openai/deployments/{AZURE_DEPLOYMENT_ID}"),
        ("base_url", "https://your-resource.openai.azure.com/"),
    ],
)
def test_upstream_placeholders_are_refused(tmp_path: Path, key: str, value: str) -> None:
    body = f'[llm]\nmodel = "m"\n[llm.vision]\n{key} = "{value}"\n'
    message = config_error(tmp_path, body)
    assert f"[llm.vision] {key} is still the example placeholder" in message


@pytest.mark.parametrize("key", ["sk-your-real-key-123", "ollama", "yourself-key-x1"])
def test_real_looking_keys_are_not_placeholders(tmp_path: Path, key: str) -> None:
    app_config = load(tmp_path, f'[llm]\nmodel = "m"\napi_key = "{key}"\n')
    assert app_config.llm["default"].api_key == key


def test_upstream_daytona_section_loads_quietly(tmp_path: Path) -> None:
    app_config = load(
        tmp_path, '[llm]\nmodel = "m"\n[daytona]\ndaytona_api_key = ""\ndaytona_target = "eu"\n'
    )
    assert app_config.daytona_config.daytona_target == "eu"


# --- upstream's sandbox client and file operators, on our backends ----------------------------


def local_settings():
    from app.config import SandboxSettings

    return SandboxSettings(backend="local", timeout=30, memory_limit="256m")


@pytest.mark.e2e
def test_local_sandbox_client_round_trip_and_timeout(tmp_path: Path) -> None:
    from app.sandbox.client import LocalSandboxClient

    async def scenario() -> None:
        client = LocalSandboxClient()
        await client.create(local_settings(), {str(tmp_path): "/workspace"})
        try:
            await client.write_file("notes/a.txt", "héllo\n")
            assert (tmp_path / "notes" / "a.txt").read_text() == "héllo\n"
            assert await client.read_file("notes/a.txt") == "héllo\n"
            assert (await client.run_command("cat notes/a.txt; echo err >&2")) == "héllo\nerr\n"
            host = tmp_path.parent / f"{tmp_path.name}-outside.txt"
            await client.copy_from("notes/a.txt", str(host))
            assert host.read_text() == "héllo\n"
            await client.copy_to(str(host), "copy.txt")
            assert (tmp_path / "copy.txt").read_text() == "héllo\n"
            with pytest.raises(SandboxTimeoutError):
                await client.run_command("sleep 5", timeout=1)
            with pytest.raises((SandboxError, PermissionError, ToolError, ValueError)):
                await client.read_file("/etc/passwd")  # outside the workspace
        finally:
            await client.cleanup()

    asyncio.run(scenario())


def test_volume_bindings_other_than_the_workspace_are_refused(tmp_path: Path) -> None:
    from app.compat.sandbox.core.sandbox import UpstreamSandbox

    with pytest.raises(UnsupportedFeatureError, match="work_dir"):
        UpstreamSandbox(local_settings(), {str(tmp_path): "/data"})


def test_sandbox_manager_enforces_its_limit() -> None:
    from app.sandbox import SandboxManager

    async def scenario() -> None:
        async with SandboxManager(max_sandboxes=0) as manager:
            with pytest.raises(SandboxResourceError, match="Maximum number of sandboxes"):
                await manager.create_sandbox(local_settings())
            assert manager.get_stats()["total_sandboxes"] == 0
            with pytest.raises(KeyError):
                await manager.get_sandbox("nope")

    asyncio.run(scenario())


@pytest.mark.e2e
def test_local_file_operator(tmp_path: Path, monkeypatch) -> None:
    from app.tool.file_operators import FileOperator, LocalFileOperator

    monkeypatch.setenv("OPENMANUS_WORKSPACE", str(tmp_path))

    async def scenario() -> None:
        operator = LocalFileOperator()
        assert isinstance(operator, FileOperator)
        await operator.write_file("d/x.txt", "data")
        assert await operator.read_file("d/x.txt") == "data"
        assert await operator.is_directory("d") and not await operator.is_directory("d/x.txt")
        assert await operator.exists("d/x.txt") and not await operator.exists("nope")
        assert await operator.run_command("echo out; echo err >&2; exit 3") == (3, "out\n", "err\n")
        with pytest.raises(ToolError):
            await operator.read_file("missing.txt")
        with pytest.raises(TimeoutError):
            await operator.run_command("sleep 5", timeout=1)

    asyncio.run(scenario())


def test_crawl4ai_tool_fetches_page_text_from_a_local_server() -> None:
    pytest.importorskip("bs4")  # the search extra
    from app.tool import Crawl4aiTool

    with WebServer() as web:
        url = web.html(
            "/page",
            "<html><script>var hidden = 1;</script><body><p>The quick "
            "brown fox jumps over the lazy dog today</p></body></html>",
        )
        result = asyncio.run(
            Crawl4aiTool().execute(urls=[url, web.url + "/missing"], word_count_threshold=3)
        )
    assert result.error is None
    assert "The quick brown fox jumps over the lazy dog today" in result.output
    assert "hidden" not in result.output
    assert f"## {web.url}/missing\nFailed: HTTP 404" in result.output
    with pytest.raises(ToolError, match="not http"):
        asyncio.run(Crawl4aiTool().execute(urls=["file:///etc/passwd"]))
