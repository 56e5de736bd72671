"""Which settings and which transport an ``LLM`` gets from its profile."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.config import LLMSettings
    from app.llm.transport import Transport

__all__ = ["resolve_settings", "transport_for"]


def transport_for(settings: LLMSettings) -> Transport:
    """The profile's transport: the openai SDK for Azure or ``transport = "openai"``, else
    plain HTTP."""
    if settings.api_type == "azure" or settings.transport == "openai":
        from app.llm.sdk_transport import OpenAITransport

        return OpenAITransport(
            base_url=settings.base_url,
            api_key=settings.api_key,
            model=settings.model,
            azure=settings.api_type == "azure",
            api_version=settings.api_version,
            timeout=settings.timeout,
        )
    from app.llm.http_transport import HttpTransport

    return HttpTransport(
        base_url=settings.base_url,
        api_key=settings.api_key,
        max_connections=settings.max_concurrent_requests,
    )


def resolve_settings(config_name: str, llm_config: Any) -> LLMSettings:
    """Settings from an explicit ``llm_config`` or from the config file's profiles."""
    from app.config import LLMSettings, config

    if llm_config is None:
        profiles = config.llm
    elif isinstance(llm_config, LLMSettings):
        return llm_config
    elif isinstance(llm_config, dict) and "model" in llm_config:
        return LLMSettings(**llm_config)
    elif isinstance(llm_config, dict):
        profiles = llm_config
    else:
        raise TypeError(
            f"llm_config must be LLMSettings or a dict, not {type(llm_config).__name__}"
        )
    settings = profiles.get(config_name) or profiles.get("default")
    if settings is None:
        raise ValueError(f"No LLM profile named {config_name!r} and no 'default' profile")
    return settings if isinstance(settings, LLMSettings) else LLMSettings(**settings)
