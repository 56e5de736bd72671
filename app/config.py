"""Configuration: ``config/config.toml`` (+ ``config/mcp.json``) read into validated models.

Upstream read its config at import time and quietly fell back to the example file with its
placeholder key, so a missing or broken config surfaced later as a puzzling 401. Here
importing reads nothing; the first access through the :data:`config` facade (or an explicit
:func:`load_config`) reads the file once and fails early with one message that names the
file, the key as written in TOML and what to do about it.
"""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

from pydantic import (
    BaseModel,
    ValidationError,
)

from app.config_env import ExpansionError, expand_string, expand_tree
from app.config_files import nested_error, parse_toml, read_limited, too_deep
from app.config_models import (
    DEFAULT_PROFILE,
    PROJECT_ROOT,
    CompactionSettings,
    LimitsSettings,
    LLMSettings,
    ModelPrice,
)
from app.config_report import (
    describe_error,
    describe_errors,
    json_key,
    short_repr,
    suggest,
    toml_key,
    unknown_keys,
)
from app.exceptions import ConfigError
from app.logger import logger, register_secret

if TYPE_CHECKING:
    # The other sections are imported when a config is loaded or one is first named here
    # (see ``__getattr__`` at the end): building an ``LLMSettings`` in code needs none.
    from app.config_sections import (
        AppConfig,
        BrowserSettings,
        DaytonaSettings,
        MCPServerConfig,
        MCPSettings,
        ProxySettings,
        RunflowSettings,
        SandboxSettings,
        SearchSettings,
        WebSettings,
    )

__all__ = [
    "CONFIG_ENV_VAR",
    "PLACEHOLDER_API_KEYS",
    "PROJECT_ROOT",
    "WORKSPACE_ENV_VAR",
    "WORKSPACE_ROOT",  # read through the module __getattr__ (the active workspace)
    "AppConfig",
    "BrowserSettings",
    "Config",
    "DaytonaSettings",
    "LLMSettings",
    "MCPServerConfig",
    "MCPSettings",
    "ProxySettings",
    "RunflowSettings",
    "SandboxSettings",
    "SearchSettings",
    "WebSettings",
    "config",
    "find_config_path",
    "get_project_root",
    "load_config",
]


#: Environment variable naming the config file when no explicit path is given.
CONFIG_ENV_VAR = "OPENMANUS_CONFIG"
#: Environment variable overriding ``workspace_root`` (works even without a config file).
WORKSPACE_ENV_VAR = "OPENMANUS_WORKSPACE"

#: api_key values that are obviously example text rather than a key (compared case-insensitively).
PLACEHOLDER_API_KEYS: frozenset[str] = frozenset(
    {
        "your_api_key",
        "your-api-key",
        "your api key",
        "<your_api_key>",
        "<your-api-key>",
        "your_api_key_here",
        "your-api-key-here",
        "your_azure_api_key",
        "sk-...",
        "sk-xxx",
        "sk-xxxx",
        "changeme",
        "change_me",
    }
)


# --- loading --------------------------------------------------------------------------------


def _resolve_config_path(path: str | Path | None) -> tuple[Path, str]:
    if path is not None and str(path).strip():
        candidate, source = Path(path).expanduser(), "given explicitly"
    elif os.environ.get(CONFIG_ENV_VAR, "").strip():
        candidate = Path(os.environ[CONFIG_ENV_VAR].strip()).expanduser()
        source = f"from ${CONFIG_ENV_VAR}"
    else:
        candidate, source = PROJECT_ROOT / "config" / "config.toml", "default location"
    if candidate.is_dir():
        candidate = candidate / "config.toml"
    return candidate.absolute(), source


def find_config_path(path: str | Path | None = None) -> Path:
    """Where the config is read from: ``path``, else ``$OPENMANUS_CONFIG``, else the default.

    The file need not exist; a directory means ``<directory>/config.toml``.
    """
    return _resolve_config_path(path)[0]


def _missing_file_error(path: Path, source: str) -> ConfigError:
    example = PROJECT_ROOT / "config" / "config.example.toml"
    if path == PROJECT_ROOT / "config" / "config.toml":
        copy = f"cd {PROJECT_ROOT} && cp config/config.example.toml config/config.toml"
    else:
        copy = f"cp {example} {path}"
    return ConfigError(
        f"No configuration file at {path} ({source}).\n"
        f"Create one from the example:\n"
        f"    {copy}\n"
        f"then set model, base_url and api_key in its [llm] section "
        f"(or leave api_key out and export OPENAI_API_KEY).\n"
        f"Another location can be chosen with --config or ${CONFIG_ENV_VAR}."
    )


def _read_toml(path: Path, source: str) -> dict[str, Any]:
    if not path.is_file():
        raise _missing_file_error(path, source)
    return parse_toml(path)


def _resolve_workspace(value: Any, config_path: Path | None) -> Path:
    """``$OPENMANUS_WORKSPACE`` > the file's ``workspace_root`` > ``<project>/workspace``."""
    env_value = os.environ.get(WORKSPACE_ENV_VAR, "").strip()
    if env_value:
        return Path(env_value).expanduser().absolute()
    if value is None or (isinstance(value, str) and not value.strip()):
        return PROJECT_ROOT / "workspace"
    candidate = Path(value).expanduser()
    if not candidate.is_absolute():
        base = config_path.parent.parent if config_path is not None else PROJECT_ROOT
        candidate = base / candidate
    return candidate.absolute()


#: Example text in upstream's config files: "YOUR_API_KEY", "your ppio api key",
#: "your Jiekou.AI api key", "<your-azure-key>"...
#: (These patterns are compiled when a config is first checked, and cached by ``re``.)
_PLACEHOLDER_KEY = r"^<?\s*your\b.*\bkey\s*>?$|^<?\s*your[_-].*[_-]key\s*>?$"
#: "AZURE API VERSION", "YOUR_API_VERSION": capitals where a date-like version belongs.
_PLACEHOLDER_VERSION = r"^[A-Z0-9 _-]*\bAPI[ _-]?VERSION\b[A-Z0-9 _-]*$|^YOUR[ _-]"
#: "{YOUR_AZURE_ENDPOINT...}/openai/...", "https://your-resource.openai.azure.com".
_PLACEHOLDER_URL = r"\{[^}]*\}|\byour[_-]"


def _is_placeholder(value: Any, key: str = "api_key") -> bool:
    """Whether ``value`` of ``key`` is example text copied from a sample config."""
    if not isinstance(value, str):
        return False
    text = value.strip()
    if key == "api_version":
        return bool(re.search(_PLACEHOLDER_VERSION, text))
    if key == "base_url":
        return bool(re.search(_PLACEHOLDER_URL, text, re.IGNORECASE))
    if text.lower() in PLACEHOLDER_API_KEYS:
        return True
    return bool(re.match(_PLACEHOLDER_KEY, text, re.IGNORECASE))


class _Problems:
    """Collects errors and unknown keys for one file so they are reported together.

    An unknown key is an error when ``strict`` (a misspelt ``base_ulr`` would otherwise be
    dropped and the default used in its place), else a warning."""

    def __init__(self, path: Path, *, strict: bool = True) -> None:
        self.path = path
        self.strict = strict
        self.errors: list[str] = []
        #: (the key as written, a hint such as " (did you mean 'base_url'?)")
        self.unknown: list[tuple[str, str]] = []

    def error(self, line: str) -> None:
        if line not in self.errors:
            self.errors.append(line)

    def unknown_key(self, key: str, hint: str = "") -> None:
        if (key, hint) not in self.unknown:
            self.unknown.append((key, hint))

    def message(self) -> str:
        items = "\n".join(f"  - {line}" for line in self.errors)
        text = f"Invalid configuration in {self.path}:\n{items}"
        if self.strict and self.unknown:
            text += f"\n{STRICT_HINT}"
        return text

    def report_unknown(self) -> None:
        """Unknown keys as errors (strict) or as one warning."""
        if not self.unknown:
            return
        if self.strict:
            for key, hint in self.unknown:
                self.error(f"{key}: unknown key{hint}")
            return
        listed = "; ".join(key + hint for key, hint in self.unknown)
        logger.warning("Ignoring unknown keys in {}: {}", self.path, listed)


#: How to turn unknown-key errors into warnings (shown under them).
STRICT_HINT = (
    "Unknown keys are errors. To only warn about them (say, a config shared with another "
    "version), put strict = false at the top of config.toml, before any [table]."
)


#: Keys checked for example text, and what to do instead.
_PLACEHOLDER_KEYS = {
    "api_key": "put your real key there, or delete the line and export OPENAI_API_KEY",
    "api_version": 'put the real version there (for example api_version = "2024-10-21")',
    "base_url": "put your endpoint's real URL there",
}

_TOP_LEVEL_KEYS = (
    "strict",
    "llm",
    "browser",
    "search",
    "sandbox",
    "mcp",
    "runflow",
    "pricing",
    "compaction",
    "limits",
    "workspace_root",
    "daytona",
    "web",
)


def _load_llm(raw: dict[str, Any], problems: _Problems) -> dict[str, LLMSettings]:
    section = raw.get("llm")
    if section is None:
        problems.error(
            "no [llm] section. Add one with at least a model, e.g.\n"
            '      [llm]\n      model = "gpt-4o"\n      base_url = "https://api.openai.com/v1"\n'
            '      api_key = "${OPENAI_API_KEY}"'
        )
        return {}
    if not isinstance(section, dict):
        problems.error(f"llm: must be a table ([llm]), got {short_repr(section)}")
        return {}
    plain = {k: v for k, v in section.items() if not isinstance(v, dict)}
    tables = {k: v for k, v in section.items() if isinstance(v, dict)}

    # Unknown keys first: a misspelt model ("modle") is named with its suggestion.
    for key_path, hint in unknown_keys(LLMSettings, plain, ("llm",)):
        problems.unknown_key(toml_key(raw, key_path), hint)
    for name, table in tables.items():
        for key_path, hint in unknown_keys(LLMSettings, table, ("llm", name)):
            problems.unknown_key(toml_key(raw, key_path), hint)

    if "model" not in plain and "model" not in tables.get(DEFAULT_PROFILE, {}):
        typos = [key for key in plain if key not in LLMSettings.model_fields]
        meant = [key for key in typos if suggest(key, ["model"])]
        # Strict, the unknown key is an error of its own, with its "did you mean".
        hint = (
            f" ([llm] {meant[0]} looks like a misspelt model)"
            if meant and not problems.strict
            else ""
        )
        problems.error(
            f"[llm] has no model{hint}. Set the model name the endpoint serves, "
            f'e.g. model = "gpt-4o" (OpenAI) or model = "llama3.1" (Ollama).'
        )
        return {}

    fields = LLMSettings.model_fields
    # profile name -> the [llm.<name>] table overlaid on [llm]'s plain keys (None: only those)
    sources: dict[str, str | None] = {
        DEFAULT_PROFILE: DEFAULT_PROFILE if DEFAULT_PROFILE in tables else None
    }
    sources.update({name: name for name in tables if name != DEFAULT_PROFILE})

    profiles: dict[str, LLMSettings] = {}
    for name, table_name in sources.items():
        table = tables[table_name] if table_name is not None else {}

        def where(
            key: Any, table: dict[str, Any] = table, table_name: str | None = table_name
        ) -> tuple[str, ...]:
            # Report a key where it is written: in the profile's table, else in [llm].
            if table_name is not None and (key is None or key in table):
                return ("llm", table_name)
            return ("llm",)

        merged = {k: v for k, v in plain.items() if k in fields}
        merged.update({k: v for k, v in table.items() if k in fields})
        placeholders = [k for k in _PLACEHOLDER_KEYS if _is_placeholder(merged.get(k), k)]
        for key in placeholders:
            location = toml_key(raw, (*where(key), key))
            todo = _PLACEHOLDER_KEYS[key]
            problems.error(f"{location} is still the example placeholder {merged[key]!r}: {todo}")
        if placeholders:
            continue
        try:
            settings = LLMSettings.model_validate(merged)
        except ValidationError as exc:
            for error in exc.errors(include_url=False):
                loc = tuple(error.get("loc", ()))
                path = (*where(loc[0] if loc else None), *loc)
                problems.error(describe_error(error, path, lambda p: toml_key(raw, p)))
            continue
        profiles[name] = _with_env_key(settings)
    return profiles


def _with_env_key(settings: LLMSettings) -> LLMSettings:
    """Fill a missing api_key from the environment; local servers may legitimately have none."""
    if settings.api_key:
        return settings
    variable = "AZURE_OPENAI_API_KEY" if settings.api_type == "azure" else "OPENAI_API_KEY"
    value = os.environ.get(variable, "").strip()
    if not value:
        return settings
    return settings.model_copy(update={"api_key": value})


def _load_section(
    raw: dict[str, Any],
    name: str,
    model: type[BaseModel],
    problems: _Problems,
    skip: frozenset[str] = frozenset(),
) -> Any:
    section = raw.get(name, {})
    if not isinstance(section, dict):
        problems.error(f"{name}: must be a table ([{name}]), got {short_repr(section)}")
        return model()
    for key_path, hint in unknown_keys(model, section, (name,), skip):
        problems.unknown_key(toml_key(raw, key_path), hint)
    data = {k: v for k, v in section.items() if k not in skip}
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        for line in describe_errors(exc, (name,), lambda p: toml_key(raw, p)):
            problems.error(line)
        return model()


def _load_pricing(raw: dict[str, Any], problems: _Problems) -> dict[str, ModelPrice]:
    """``[pricing."<model>"]`` tables: prices per million tokens, by model name."""
    section = raw.get("pricing", {})
    if not isinstance(section, dict):
        problems.error(f"pricing: must be a table ([pricing]), got {short_repr(section)}")
        return {}
    prices: dict[str, ModelPrice] = {}
    for model, table in section.items():
        if not isinstance(table, dict):
            problems.error(
                f'pricing.{model}: must be a table like [pricing."{model}"] with '
                f"input and output prices, got {short_repr(table)}"
            )
            continue
        for key_path, hint in unknown_keys(ModelPrice, table, ("pricing", model)):
            problems.unknown_key(toml_key(raw, key_path), hint)
        try:
            prices[model] = ModelPrice.model_validate(table)
        except ValidationError as exc:
            for line in describe_errors(exc, ("pricing", model), lambda p: toml_key(raw, p)):
                problems.error(line)
    return prices


def _load_mcp_servers(path: Path) -> dict[str, MCPServerConfig]:
    """Servers from ``mcp.json``; a missing file means none."""
    from app.config_sections import MCPServerConfig

    if not path.is_file():
        return {}
    try:
        text = read_limited(path).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"Cannot read MCP server file {path}: {exc}") from exc
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except RecursionError:
        raise nested_error(path) from None
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"Invalid JSON in {path}: {exc.msg} (at line {exc.lineno}, column {exc.colno})"
        ) from exc
    if too_deep(data):
        raise nested_error(path)
    # Only warned about: mcp.json is shared with other MCP clients, which add keys of their own.
    problems = _Problems(path, strict=False)
    if not isinstance(data, dict):
        raise ConfigError(
            f'{path}: expected an object like {{"mcpServers": {{"name": {{...}}}}}}, '
            f"got {type(data).__name__}"
        )
    key = "mcpServers" if "mcpServers" in data else ("servers" if "servers" in data else None)
    for other in data:
        if other != key:
            problems.unknown_key(other, suggest(other, ["mcpServers"]))
    servers_raw = data.get(key, {}) if key else {}
    if not isinstance(servers_raw, dict):
        raise ConfigError(f'{path}: "{key}" must be an object mapping server ids to settings')

    def on_env_error(p: tuple[str | int, ...], problem: str) -> None:
        problems.error(f"{json_key(p)}: {problem}")

    servers: dict[str, MCPServerConfig] = {}
    for server_id, entry in servers_raw.items():
        prefix: tuple[str | int, ...] = (key or "mcpServers", server_id)
        if not isinstance(entry, dict):
            problems.error(f"{json_key(prefix)}: must be an object, got {short_repr(entry)}")
            continue
        entry = expand_tree(entry, prefix, os.environ, on_env_error)
        for key_path, hint in unknown_keys(MCPServerConfig, entry, prefix):
            problems.unknown_key(json_key(key_path), hint)
        try:
            servers[server_id] = MCPServerConfig.model_validate(entry)
        except ValidationError as exc:
            for line in describe_errors(exc, prefix, json_key):
                problems.error(line)
    problems.report_unknown()
    if problems.errors:
        raise ConfigError(problems.message())
    return servers


def _register_secrets(app: AppConfig) -> None:
    for settings in app.llm.values():
        register_secret(settings.api_key)
    proxy = app.browser_config.proxy
    if proxy is not None:
        register_secret(proxy.password)
    for server in app.mcp_config.servers.values():
        for name, value in (server.headers or {}).items():
            if re.search(r"auth|key|token|secret|pass", name, re.IGNORECASE):
                register_secret(value.split(" ", 1)[-1])
        for name, value in (server.env or {}).items():
            if re.search(r"key|token|secret|pass", name, re.IGNORECASE):
                register_secret(value)


def load_config(
    path: str | Path | None = None, *, sections: frozenset[str] | None = None
) -> AppConfig:
    """Read and validate the config (and ``mcp.json`` beside it) into an :class:`AppConfig`.

    ``path`` None means ``$OPENMANUS_CONFIG`` or ``<project>/config/config.toml``. Raises
    :class:`ConfigError` with every problem found, unknown keys included (each with a "did
    you mean" when one is close) unless the file says ``strict = false``: then they are only
    warned about, as unknown keys of ``mcp.json`` always are.
    ``sections`` (top-level TOML keys, e.g. ``{"sandbox", "workspace_root"}``) reads only
    those: the rest keep their defaults and are neither expanded nor checked, so a program
    that needs no model does not fail on an unset ``${OPENAI_API_KEY}``. Without ``"llm"``
    the result has no LLM profiles (the :data:`config` facade reads them on first use), and
    ``mcp.json`` is read only with ``"mcp"``.
    """
    config_path, source = _resolve_config_path(path)
    document = _read_toml(config_path, source)
    strict = document.get("strict", True)
    if sections is not None:
        document = {key: value for key, value in document.items() if key in sections}
    problems = _Problems(config_path, strict=strict is not False)
    if not isinstance(strict, bool):
        problems.error(f"strict: must be true or false, got {short_repr(strict)}")

    def on_env_error(p: tuple[str | int, ...], problem: str) -> None:
        problems.error(f"{toml_key(document, p)}: {problem}")

    raw = expand_tree(document, (), os.environ, on_env_error)
    if problems.errors:
        raise ConfigError(problems.message())

    for key in raw:
        if key not in _TOP_LEVEL_KEYS:
            problems.unknown_key(toml_key(raw, (key,)), suggest(key, _TOP_LEVEL_KEYS))

    from app.config_sections import (
        AppConfig,
        BrowserSettings,
        DaytonaSettings,
        MCPSettings,
        RunflowSettings,
        SandboxSettings,
        SearchSettings,
        WebSettings,
    )

    llm = _load_llm(raw, problems) if sections is None or "llm" in sections else None
    browser = _load_section(raw, "browser", BrowserSettings, problems)
    search = _load_section(raw, "search", SearchSettings, problems)
    sandbox = _load_section(raw, "sandbox", SandboxSettings, problems)
    mcp = _load_section(raw, "mcp", MCPSettings, problems, skip=frozenset({"servers"}))
    if isinstance(raw.get("mcp"), dict) and "servers" in raw["mcp"]:
        problems.unknown_key("[mcp] servers", " (MCP servers belong in mcp.json)")
    runflow = _load_section(raw, "runflow", RunflowSettings, problems)
    compaction = _load_section(raw, "compaction", CompactionSettings, problems)
    limits = _load_section(raw, "limits", LimitsSettings, problems)
    pricing = _load_pricing(raw, problems)
    daytona = _load_section(raw, "daytona", DaytonaSettings, problems)
    web = _load_section(raw, "web", WebSettings, problems)

    workspace_value = raw.get("workspace_root")
    if workspace_value is not None and not isinstance(workspace_value, str):
        problems.error(f"workspace_root: must be a path string, got {short_repr(workspace_value)}")
        workspace_value = None

    problems.report_unknown()
    if problems.errors:
        raise ConfigError(problems.message())

    if sections is None or "mcp" in sections:
        mcp.servers = _load_mcp_servers(config_path.parent / "mcp.json")
    # No [llm] read: the one field whose validation needs it is left empty (see Config.llm).
    build = AppConfig if llm is not None else AppConfig.model_construct
    app = build(
        llm=llm or {},
        browser_config=browser,
        search_config=search,
        sandbox=sandbox,
        mcp_config=mcp,
        run_flow_config=runflow,
        pricing=pricing,
        compaction=compaction,
        limits=limits,
        daytona_config=daytona,
        web=web,
        workspace_root=_resolve_workspace(workspace_value, config_path),
        config_path=config_path,
    )
    _register_secrets(app)
    return app


def _read_workspace_root(path: Path) -> Path:
    """Only ``workspace_root`` from the file: tools need it even if the LLM part is unusable."""
    document = _read_toml(path, "")
    value = document.get("workspace_root")
    if value is None:
        return _resolve_workspace(None, path)
    if not isinstance(value, str):
        raise ConfigError(
            f"Invalid configuration in {path}: workspace_root must be a path string, "
            f"got {short_repr(value)}"
        )
    try:
        expanded = expand_string(value, os.environ)
    except ExpansionError as exc:
        raise ConfigError(
            f"Invalid configuration in {path}: workspace_root: {exc.problem}"
        ) from exc
    return _resolve_workspace(expanded, path)


# --- the process-wide facade ----------------------------------------------------------------


class Config:
    """Lazy access to the active configuration under upstream's attribute names.

    Nothing is read until an attribute is used; ``load`` (e.g. from ``--config``) and ``use``
    (a config built in code) replace what is active.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._app: AppConfig | None = None
        self._workspace_cache: tuple[Path, Path] | None = None
        #: The file whose [llm] is still unread (``load`` with ``sections`` without "llm").
        self._llm_unread: Path | None = None

    def load(
        self, path: str | Path | None = None, *, sections: frozenset[str] | None = None
    ) -> AppConfig:
        """Read the config now (``path`` and ``sections`` as for :func:`load_config`) and
        make it active; sections left out are read in full when first needed."""
        app = load_config(path, sections=sections)
        with self._lock:
            self._app = app
            self._workspace_cache = None
            partial = sections is not None and "llm" not in sections
            self._llm_unread = app.config_path if partial else None
        return app

    def use(self, app_config: AppConfig | LLMSettings) -> None:
        """Make a config built in code active (libraries, tests); no file is read.

        An ``LLMSettings`` alone stands for an ``AppConfig`` with defaults for the rest."""
        from app.config_sections import AppConfig

        if isinstance(app_config, LLMSettings):
            app_config = AppConfig(llm={DEFAULT_PROFILE: app_config})
        if not isinstance(app_config, AppConfig):
            raise TypeError(
                f"expected an AppConfig or LLMSettings, got {type(app_config).__name__}"
            )
        _register_secrets(app_config)
        with self._lock:
            self._app = app_config
            self._workspace_cache = None
            self._llm_unread = None

    def reset(self) -> None:
        """Forget the active config; the next access loads again."""
        with self._lock:
            self._app = None
            self._workspace_cache = None
            self._llm_unread = None

    @property
    def is_loaded(self) -> bool:
        """Whether a config is active (without triggering a load)."""
        return self._app is not None

    @property
    def app_config(self) -> AppConfig:
        """The active :class:`AppConfig`, loading the default file on first use."""
        app = self._app
        if app is not None:
            return app
        with self._lock:
            if self._app is None:
                self._app = load_config()
            return self._app

    @property
    def llm(self) -> dict[str, LLMSettings]:
        if self._llm_unread is not None:
            # Loaded in part by a program that needed no model so far: read the whole file
            # now, and fail now with its own message (e.g. an unset ${OPENAI_API_KEY}).
            with self._lock:
                if self._llm_unread is not None:
                    self.load(self._llm_unread)
        return self.app_config.llm

    @overload
    def section_or_default(self, name: Literal["sandbox"]) -> SandboxSettings: ...
    @overload
    def section_or_default(self, name: Literal["browser_config"]) -> BrowserSettings: ...
    @overload
    def section_or_default(self, name: Literal["search_config"]) -> SearchSettings: ...
    @overload
    def section_or_default(self, name: Literal["mcp_config"]) -> MCPSettings: ...
    @overload
    def section_or_default(self, name: Literal["daytona_config"]) -> DaytonaSettings: ...
    @overload
    def section_or_default(self, name: str) -> Any: ...
    def section_or_default(self, name: str) -> Any:
        """Section ``name`` (e.g. ``"browser_config"``) of the active config, or its defaults
        when there is no config file at all: tools must work without one (only the LLM
        needs settings). A config file with errors is still reported."""
        if self._app is None and not find_config_path().is_file():
            from app.config_sections import AppConfig

            field = AppConfig.model_fields[name]
            assert field.default_factory is not None, f"{name} has no defaults"
            return field.get_default(call_default_factory=True, validated_data={})
        return getattr(self.app_config, name)

    @property
    def sandbox(self) -> SandboxSettings:
        return self.app_config.sandbox

    @property
    def browser_config(self) -> BrowserSettings:
        return self.app_config.browser_config

    @property
    def search_config(self) -> SearchSettings:
        return self.app_config.search_config

    @property
    def mcp_config(self) -> MCPSettings:
        return self.app_config.mcp_config

    @property
    def run_flow_config(self) -> RunflowSettings:
        return self.app_config.run_flow_config

    @property
    def pricing(self) -> dict[str, ModelPrice]:
        return self.app_config.pricing

    @property
    def compaction(self) -> CompactionSettings:
        return self.app_config.compaction

    @property
    def daytona(self) -> DaytonaSettings:
        return self.app_config.daytona_config

    @property
    def web(self) -> WebSettings:
        return self.app_config.web

    @property
    def config_path(self) -> Path | None:
        return self.app_config.config_path

    @property
    def workspace_root(self) -> Path:
        """Usable without a config file: active config, ``$OPENMANUS_WORKSPACE``, file, default."""
        app = self._app
        if app is not None:
            return app.workspace_root
        env_value = os.environ.get(WORKSPACE_ENV_VAR, "").strip()
        if env_value:
            return Path(env_value).expanduser().absolute()
        path = find_config_path()
        if not path.is_file():
            return PROJECT_ROOT / "workspace"
        with self._lock:
            cached = self._workspace_cache
            if cached is not None and cached[0] == path:
                return cached[1]
            root = _read_workspace_root(path)
            self._workspace_cache = (path, root)
            return root

    @property
    def root_path(self) -> Path:
        return PROJECT_ROOT

    def __repr__(self) -> str:
        state = f"loaded from {self._app.config_path}" if self._app else "not loaded"
        return f"<Config {state}>"


config = Config()


def get_project_root() -> Path:
    """The project directory (upstream's helper; the same as :data:`PROJECT_ROOT`)."""
    return PROJECT_ROOT


if TYPE_CHECKING:
    WORKSPACE_ROOT: Path  # read through __getattr__ below


def __getattr__(name: str) -> Any:
    # Upstream's WORKSPACE_ROOT was a constant; here the workspace is configurable, so the
    # name reads the active one (config file, $OPENMANUS_WORKSPACE) when first asked for.
    if name == "WORKSPACE_ROOT":
        return config.workspace_root
    if name in __all__:  # a section of app.config_sections, imported on first access
        from app import config_models

        return getattr(config_models, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
