"""The environment model-run code gets: the agent's own minus every credential, by name
(``*_API_KEY``, ``*TOKEN*``...) or by value (a secret the program registered)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from app.logger import register_secret, registered_secrets

#: Values of credential-named variables at least this long are redacted wherever they show up
#: (shorter ones, such as ``USE_AUTH=1``, would redact ordinary text).
MIN_ENV_SECRET_LENGTH = 8

#: Names of variables that hold credentials by convention.
SECRET_NAME = re.compile(
    r"(API_?KEY|_KEY$|^KEY$|TOKEN|SECRET|PASSW(OR)?D|PASSPHRASE|CREDENTIAL|PRIVATE|COOKIE"
    r"|SESSION_ID|AUTH)",
    re.IGNORECASE,
)
#: Not secret by name, but hand out access anyway (an SSH agent, a cloud config location).
_ACCESS_VARS = frozenset(
    {
        "SSH_AUTH_SOCK",
        "GPG_AGENT_INFO",
        "DOCKER_HOST",
        "DOCKER_CONFIG",
        "KUBECONFIG",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "AWS_PROFILE",
        "AWS_SHARED_CREDENTIALS_FILE",
        "AWS_CONFIG_FILE",
        "NETRC",
        "OPENMANUS_CONFIG",
    }
)
#: Names that match the pattern but are harmless and useful to keep.
_KEEP = frozenset({"PYTHONHASHSEED", "SSL_CERT_FILE", "SSL_CERT_DIR"})


def is_secret_name(name: str) -> bool:
    """Whether a variable of this name must not reach model-run code."""
    if name in _KEEP:
        return False
    return name in _ACCESS_VARS or bool(SECRET_NAME.search(name))


def register_environment_secrets(base: Mapping[str, str] | None = None) -> None:
    """Register credential-named variables' values as secrets: redacted from what children print."""
    env = os.environ if base is None else base
    for name, value in env.items():
        if (
            name not in _ACCESS_VARS
            and is_secret_name(name)
            and len(value.strip()) >= (MIN_ENV_SECRET_LENGTH)
        ):
            register_secret(value)


def scrub_environment(
    base: Mapping[str, str] | None = None, *, extra_secrets: frozenset[str] = frozenset()
) -> dict[str, str]:
    """A copy of ``base`` (default ``os.environ``) without credentials, by name and value."""
    env = dict(os.environ if base is None else base)
    register_environment_secrets(env)
    values = registered_secrets() | extra_secrets
    kept: dict[str, str] = {}
    for name, value in env.items():
        if is_secret_name(name):
            continue
        if values and any(secret in value for secret in values):
            continue
        kept[name] = value
    return kept
