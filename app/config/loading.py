"""Reading ``config/config.toml`` (+ ``mcp.json``) into an :class:`AppConfig`, and :data:`config`,
the facade under upstream's names: read on first access, failing early with what to do."""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar, cast, overload

from pydantic import BaseModel

from app.config.report import (
    KeyPath,
    Problems,
    json_key,
    short_repr,
    suggest,
    toml_key,
    unknown_keys,
)
from app.config.settings import (
    DEFAULT_PROFILE,
    PROJECT_ROOT,
    AppConfig,
    BrowserSettings,
    CompactionSettings,
    DaytonaSettings,
    LimitsSettings,
    LLMSettings,
    MCPServerConfig,
    MCPSettings,
    ModelPrice,
    RunflowSettings,
    SandboxSettings,
    SearchSettings,
    TracingSettings,
    WebSettings,
)
from app.exceptions import ConfigError
from app.logger import register_secret

#: Environment variable naming the config file when no explicit path is given.
CONFIG_ENV_VAR = "OPENMANUS_CONFIG"
#: Environment variable overriding ``workspace_root`` (works even without a config file).
WORKSPACE_ENV_VAR = "OPENMANUS_WORKSPACE"
#: Config files above this size are refused before parsing (bounded time and memory).
MAX_CONFIG_BYTES = 4 * 1024 * 1024
#: Tables and arrays nested deeper than this are refused (nothing valid comes close).
MAX_CONFIG_DEPTH = 32

#: api_key values that are obviously example text rather than a key (compared case-insensitively).
PLACEHOLDER_API_KEYS: frozenset[str] = frozenset(
    "your_api_key|your-api-key|your api key|<your_api_key>|<your-api-key>|your_api_key_here|"
    "your-api-key-here|your_azure_api_key|sk-...|sk-xxx|sk-xxxx|changeme|change_me".split("|")
)
#: Keys checked for example text from upstream's sample files: its look, and what to do.
_PLACEHOLDERS = {
    # "YOUR_API_KEY", "your ppio api key", "your Jiekou.AI api key", "<your-azure-key>"...
    "api_key": (
        r"(?i)^<?\s*your\b.*\bkey\s*>?$|^<?\s*your[_-].*[_-]key\s*>?$",
        "put your real key there, or delete the line and export OPENAI_API_KEY",
    ),
    # "AZURE API VERSION", "YOUR_API_VERSION": capitals where a date-like version belongs.
    "api_version": (
        r"^[A-Z0-9 _-]*\bAPI[ _-]?VERSION\b[A-Z0-9 _-]*$|^YOUR[ _-]",
        'put the real version there (for example api_version = "2024-10-21")',
    ),
    # "{YOUR_AZURE_ENDPOINT...}/openai/...", "https://your-resource.openai.azure.com".
    "base_url": (r"(?i)\{[^}]*\}|\byour[_-]", "put your endpoint's real URL there"),
}

#: The tables read into models of their own: TOML name -> (AppConfig field, model).
_SECTIONS: dict[str, tuple[str, type[BaseModel]]] = {
    "browser": ("browser_config", BrowserSettings),
    "search": ("search_config", SearchSettings),
    "sandbox": ("sandbox", SandboxSettings),
    "mcp": ("mcp_config", MCPSettings),
    "runflow": ("run_flow_config", RunflowSettings),
    "compaction": ("compaction", CompactionSettings),
    "limits": ("limits", LimitsSettings),
    "daytona": ("daytona_config", DaytonaSettings),
    "web": ("web", WebSettings),
    "tracing": ("tracing", TracingSettings),
}
_TOP_LEVEL_KEYS = ("strict", "llm", "pricing", "workspace_root", *_SECTIONS)

_ENV_TOKEN = re.compile(
    r"\$\$\{"  # escaped: $${ -> literal ${
    r"|\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?\}"
    r"|\$\{"  # anything else starting with ${ is malformed
)


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
    """Where the config is read from: ``path``, else ``$OPENMANUS_CONFIG``, else the default
    (need not exist; a directory means ``<directory>/config.toml``)."""
    return _resolve_config_path(path)[0]


def _too_deep(value: Any) -> bool:
    """Whether tables/arrays nest deeper than :data:`MAX_CONFIG_DEPTH` (without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_CONFIG_DEPTH:
            return True
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return False


def _parse_file(path: Path, parse: Callable[[str], Any], what: str, kind: str) -> Any:
    """``parse`` of the file's text, refused above :data:`MAX_CONFIG_BYTES` before parsing
    and above :data:`MAX_CONFIG_DEPTH` after; every failure a ``ConfigError`` naming it."""
    try:
        with path.open("rb") as fh:
            data = fh.read(MAX_CONFIG_BYTES + 1)
            size = max(len(data), os.fstat(fh.fileno()).st_size)
        if size > MAX_CONFIG_BYTES:
            raise ConfigError(
                f"{path}: config file too large ({size / 1e6:.0f} MB, limit "
                f"{MAX_CONFIG_BYTES // (1024 * 1024)} MB)"
            )
        text = data.decode("utf-8")
    except OSError as exc:
        raise ConfigError(f"Cannot read {what} {path}: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path} is not valid UTF-8 text (byte {exc.start})") from exc
    nested = ConfigError(
        f"{path}: {path.name} is nested too deeply (more than {MAX_CONFIG_DEPTH} levels of "
        "tables or arrays)"
    )
    try:
        document = parse(text)
    except RecursionError:
        raise nested from None
    except ValueError as exc:  # TOMLDecodeError, JSONDecodeError: both say where
        raise ConfigError(f"Invalid {kind} in {path}: {exc}") from exc
    if _too_deep(document):
        raise nested
    return document


def _read_toml(path: Path, source: str) -> dict[str, Any]:
    import tomllib  # only when a file is read: a run configured in code never needs it (4 ms)

    if path.is_file():
        document: dict[str, Any] = _parse_file(path, tomllib.loads, "configuration file", "TOML")
        return document
    example = PROJECT_ROOT / "config" / "config.example.toml"
    if path == PROJECT_ROOT / "config" / "config.toml":
        copy = f"cd {PROJECT_ROOT} && cp config/config.example.toml config/config.toml"
    else:
        copy = f"cp {example} {path}"
    raise ConfigError(
        f"No configuration file at {path} ({source}).\n"
        f"Create one from the example:\n"
        f"    {copy}\n"
        f"then set model, base_url and api_key in its [llm] section "
        f"(or leave api_key out and export OPENAI_API_KEY).\n"
        f"Another location can be chosen with --config or ${CONFIG_ENV_VAR}."
    )


def _expand_string(value: str) -> str:
    """``${VAR}`` and ``${VAR:-default}`` from the environment; ValueError says what is wrong."""
    if "${" not in value:
        return value

    def substitute(match: re.Match[str]) -> str:
        if match.group(0) == "$${":
            return "${"
        name = match.group("name")
        if name is None:
            raise ValueError(
                "malformed ${...} reference (use ${NAME} or ${NAME:-default}; "
                "write $${ for a literal ${)"
            )
        default = match.group("default")
        current = os.environ.get(name)
        if default is not None:
            return current if current else default
        if current is None:
            raise ValueError(
                f"environment variable {name} is not set (export it, or give a default "
                f"with ${{{name}:-value}})"
            )
        return current

    return _ENV_TOKEN.sub(substitute, value)


def _expand(value: Any, path: KeyPath, on_error: Callable[[KeyPath, str], None]) -> Any:
    """Expand ``${VAR}`` in every string of a parsed document, reporting failures by key."""
    if isinstance(value, str):
        try:
            return _expand_string(value)
        except ValueError as exc:
            on_error(path, str(exc))
            return value
    if isinstance(value, dict):
        return {k: _expand(v, (*path, k), on_error) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, (*path, i), on_error) for i, v in enumerate(value)]
    return value


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


def _is_placeholder(value: Any, key: str) -> bool:
    """Whether ``value`` of ``key`` is example text copied from a sample config."""
    if not isinstance(value, str):
        return False
    text = value.strip()
    if key == "api_key" and text.lower() in PLACEHOLDER_API_KEYS:
        return True
    return re.search(_PLACEHOLDERS[key][0], text) is not None


def _load_llm(raw: dict[str, Any], problems: Problems) -> dict[str, LLMSettings]:
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

    fields = LLMSettings.model_fields
    if "model" not in plain and "model" not in tables.get(DEFAULT_PROFILE, {}):
        meant = [key for key in plain if key not in fields and suggest(key, ["model"])]
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

    # profile name -> the [llm.<name>] table overlaid on [llm]'s plain keys (None: only those)
    sources: dict[str, str | None] = {
        DEFAULT_PROFILE: DEFAULT_PROFILE if DEFAULT_PROFILE in tables else None
    }
    sources.update({name: name for name in tables if name != DEFAULT_PROFILE})

    profiles: dict[str, LLMSettings] = {}
    for name, table_name in sources.items():
        table = tables[table_name] if table_name is not None else {}

        def name_key(
            path: KeyPath, table: dict[str, Any] = table, name: str | None = table_name
        ) -> str:
            # A key as written: in the profile's table, else in [llm] (an empty path: the table).
            key = path[0] if path else None
            head = ("llm", name) if name is not None and (key is None or key in table) else ("llm",)
            return toml_key(raw, (*head, *path))

        merged = {k: v for k, v in plain.items() if k in fields}
        merged.update({k: v for k, v in table.items() if k in fields})
        placeholders = [k for k in _PLACEHOLDERS if _is_placeholder(merged.get(k), k)]
        for key in placeholders:
            todo = _PLACEHOLDERS[key][1]
            location = name_key((key,))
            problems.error(f"{location} is still the example placeholder {merged[key]!r}: {todo}")
        if placeholders:
            continue
        settings = problems.validate(LLMSettings, merged, (), name_key)
        if settings is not None:
            profiles[name] = _with_env_key(settings)
    return profiles


#: The environment variable a profile's missing api_key comes from, by api_type (default:
#: OPENAI_API_KEY). Bedrock takes its credentials from the AWS chain, not from api_key.
_KEY_VARIABLES: dict[str, str | None] = {
    "azure": "AZURE_OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "aws": None,
}


def _with_env_key(settings: LLMSettings) -> LLMSettings:
    """Fill a missing api_key from the environment; local servers may legitimately have none."""
    variable = _KEY_VARIABLES.get(settings.api_type, "OPENAI_API_KEY")
    if settings.api_key or variable is None:
        return settings
    value = os.environ.get(variable, "").strip()
    if not value:
        return settings
    return settings.model_copy(update={"api_key": value})


def _load_section(
    raw: dict[str, Any], name: str, model: type[BaseModel], problems: Problems
) -> Any:
    section = raw.get(name, {})
    if not isinstance(section, dict):
        problems.error(f"{name}: must be a table ([{name}]), got {short_repr(section)}")
        return model()
    if name == "mcp" and "servers" in section:
        problems.unknown_key("[mcp] servers", " (MCP servers belong in mcp.json)")
        section = {k: v for k, v in section.items() if k != "servers"}
    return problems.validate(model, section, (name,), lambda p: toml_key(raw, p)) or model()


def _load_pricing(raw: dict[str, Any], problems: Problems) -> dict[str, ModelPrice]:
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
        price = problems.validate(ModelPrice, table, ("pricing", model), lambda p: toml_key(raw, p))
        if price is not None:
            prices[model] = price
    return prices


def _load_mcp_servers(path: Path) -> dict[str, MCPServerConfig]:
    """Servers from ``mcp.json``; a missing file means none."""
    if not path.is_file():
        return {}
    data = _parse_file(
        path, lambda text: json.loads(text) if text.strip() else {}, "MCP server file", "JSON"
    )
    if not isinstance(data, dict):
        raise ConfigError(
            f'{path}: expected an object like {{"mcpServers": {{"name": {{...}}}}}}, '
            f"got {type(data).__name__}"
        )
    # Only warned about: mcp.json is shared with other MCP clients, which add keys of their own.
    problems = Problems(path, strict=False)
    key = "mcpServers" if "mcpServers" in data else ("servers" if "servers" in data else None)
    for other in data:
        if other != key:
            problems.unknown_key(other, suggest(other, ["mcpServers"]))
    servers_raw = data.get(key, {}) if key else {}
    if not isinstance(servers_raw, dict):
        raise ConfigError(f'{path}: "{key}" must be an object mapping server ids to settings')

    servers: dict[str, MCPServerConfig] = {}
    for server_id, entry in servers_raw.items():
        prefix: KeyPath = (key or "mcpServers", server_id)
        if not isinstance(entry, dict):
            problems.error(f"{json_key(prefix)}: must be an object, got {short_repr(entry)}")
            continue
        entry = _expand(
            entry, prefix, lambda p, problem: problems.error(f"{json_key(p)}: {problem}")
        )
        server = problems.validate(MCPServerConfig, entry, prefix, json_key)
        if server is not None:
            servers[server_id] = server
    problems.check()
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
    """The config (and ``mcp.json`` beside it), every problem in one :class:`ConfigError`.

    ``sections`` (top-level TOML keys) reads only those, the rest keep defaults unchecked: a
    program needing no model must not fail on an unset ``${OPENAI_API_KEY}``."""
    config_path, source = _resolve_config_path(path)
    document = _read_toml(config_path, source)
    strict = document.get("strict", True)
    if sections is not None:
        document = {key: value for key, value in document.items() if key in sections}
    problems = Problems(config_path, strict=strict is not False)
    if not isinstance(strict, bool):
        problems.error(f"strict: must be true or false, got {short_repr(strict)}")
    raw = _expand(
        document, (), lambda p, problem: problems.error(f"{toml_key(document, p)}: {problem}")
    )
    problems.check()

    for key in raw:
        if key not in _TOP_LEVEL_KEYS:
            problems.unknown_key(toml_key(raw, (key,)), suggest(key, _TOP_LEVEL_KEYS))
    llm = _load_llm(raw, problems) if sections is None or "llm" in sections else None
    loaded = {
        field: _load_section(raw, name, model, problems)
        for name, (field, model) in _SECTIONS.items()
    }
    pricing = _load_pricing(raw, problems)
    workspace_value = raw.get("workspace_root")
    if workspace_value is not None and not isinstance(workspace_value, str):
        problems.error(f"workspace_root: must be a path string, got {short_repr(workspace_value)}")
        workspace_value = None
    problems.check()

    if sections is None or "mcp" in sections:
        loaded["mcp_config"].servers = _load_mcp_servers(config_path.parent / "mcp.json")
    # No [llm] read: the one field whose validation needs it is left empty (see Config.llm).
    build = AppConfig if llm is not None else AppConfig.model_construct
    app = build(
        llm=llm or {},
        **loaded,
        pricing=pricing,
        workspace_root=_resolve_workspace(workspace_value, config_path),
        config_path=config_path,
    )
    _register_secrets(app)
    return app


_T = TypeVar("_T")


class _Section(Generic[_T]):
    """A read-only attribute of :class:`Config`: field ``field`` of the active config."""

    def __init__(self, field: str) -> None:
        self.field = field

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, facade: Config | None, owner: type | None = None) -> _T:
        # On the class: the descriptor itself, as a property gives itself.
        return cast(_T, self if facade is None else getattr(facade.app_config, self.field))

    def __set__(self, facade: Config, value: object) -> None:
        raise AttributeError(f"property {self.name!r} of 'Config' object has no setter")


class Config:
    """The active configuration under upstream's attribute names, read on first use;
    ``load`` (``--config``) and ``use`` (built in code) replace it."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._app: AppConfig | None = None
        self._workspace_cache: tuple[Path, Path] | None = None
        self._llm_unread: Path | None = None  # loaded with ``sections`` but without "llm"

    def _activate(self, app: AppConfig | None, llm_unread: Path | None = None) -> None:
        with self._lock:
            self._app = app
            self._workspace_cache = None
            self._llm_unread = llm_unread

    def load(
        self, path: str | Path | None = None, *, sections: frozenset[str] | None = None
    ) -> AppConfig:
        """Read the config now (``path`` and ``sections`` as for :func:`load_config`) and
        make it active; sections left out are read in full when first needed."""
        app = load_config(path, sections=sections)
        partial = sections is not None and "llm" not in sections
        self._activate(app, app.config_path if partial else None)
        return app

    def use(self, app_config: AppConfig | LLMSettings) -> None:
        """Make a config built in code active (an ``LLMSettings`` alone: defaults for the
        rest); no file is read."""
        if isinstance(app_config, LLMSettings):
            app_config = AppConfig(llm={DEFAULT_PROFILE: app_config})
        if not isinstance(app_config, AppConfig):
            raise TypeError(
                f"expected an AppConfig or LLMSettings, got {type(app_config).__name__}"
            )
        _register_secrets(app_config)
        self._activate(app_config)

    def reset(self) -> None:
        """Forget the active config; the next access loads again."""
        self._activate(None)

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
            # Loaded in part by a program that needed no model so far: read it all now, failing
            # with its own message (e.g. an unset ${OPENAI_API_KEY}).
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
        """Section ``name`` of the active config, or its defaults when there is no config file:
        tools must work without one (a file with errors is still reported)."""
        if self._app is None and not find_config_path().is_file():
            field = AppConfig.model_fields[name]
            assert field.default_factory is not None, f"{name} has no defaults"
            return field.get_default(call_default_factory=True, validated_data={})
        return getattr(self.app_config, name)

    sandbox = _Section[SandboxSettings]("sandbox")
    browser_config = _Section[BrowserSettings]("browser_config")
    search_config = _Section[SearchSettings]("search_config")
    mcp_config = _Section[MCPSettings]("mcp_config")
    run_flow_config = _Section[RunflowSettings]("run_flow_config")
    pricing = _Section[dict[str, ModelPrice]]("pricing")
    compaction = _Section[CompactionSettings]("compaction")
    daytona = _Section[DaytonaSettings]("daytona_config")
    web = _Section[WebSettings]("web")
    tracing = _Section[TracingSettings]("tracing")
    config_path = _Section[Path | None]("config_path")

    @property
    def workspace_root(self) -> Path:
        """Usable without a config file: active config, ``$OPENMANUS_WORKSPACE``, file, default."""
        app = self._app
        if app is not None:
            return app.workspace_root
        path = find_config_path()
        if os.environ.get(WORKSPACE_ENV_VAR, "").strip() or not path.is_file():
            return _resolve_workspace(None, None)
        with self._lock:
            cached = self._workspace_cache
            if cached is None or cached[0] != path:
                # Only workspace_root: tools need it even if the LLM part is unusable.
                app = load_config(path, sections=frozenset({"workspace_root"}))
                cached = self._workspace_cache = (path, app.workspace_root)
            return cached[1]

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
