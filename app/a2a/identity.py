"""Who is calling the A2A server: its callers, each known by a token (docs/a2a.md#callers).

Each caller owns what it makes (tasks, conversations, webhooks, workspaces); another caller's
ids are unknown to it. ``OPENMANUS_A2A_TOKEN`` is one caller (``default``); a tokens file
names more. Without any token there is one caller, as on a single-user loopback server.
"""

from __future__ import annotations

import hmac
import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from a2a.auth.user import User

from app.exceptions import ConfigError

#: The name of the caller of ``OPENMANUS_A2A_TOKEN`` (and of a server without tokens).
DEFAULT_NAME = "default"
#: A caller's name: it names a directory, so letters, digits, ``.``, ``_`` and ``-`` only.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
#: A token from the file must be at least this long (guessing must not be practical).
MIN_TOKEN_CHARS = 16
#: Named callers' conversations live under ``<root>/callers/<name>/`` (a session id starts
#: with a digit, so the folder cannot be a conversation's).
CALLERS_DIR = "callers"


@dataclass(frozen=True)
class Caller:
    """One identity. ``owner`` scopes the SDK's stores: ``""`` for the default caller, whose
    conversations stay where a server without tokens keeps them."""

    name: str
    owner: str
    token: str | None = field(default=None, repr=False)

    def root(self, base: Path) -> Path:
        """Where this caller's conversations and session files live under ``base``."""
        return base / CALLERS_DIR / self.name if self.owner else base


DEFAULT_CALLER = Caller(DEFAULT_NAME, "")


class CallerUser(User):
    """The SDK's view of a caller: its owner scope is the user name."""

    def __init__(self, caller: Caller) -> None:
        self.caller = caller

    @property
    def is_authenticated(self) -> bool:
        return self.caller.token is not None

    @property
    def user_name(self) -> str:
        return self.caller.owner


class Callers:
    """The server's callers; with none holding a token, every request is the default one."""

    def __init__(self, callers: Sequence[Caller] = ()) -> None:
        self.callers = tuple(callers) or (DEFAULT_CALLER,)
        self.required = any(c.token is not None for c in self.callers)

    def __len__(self) -> int:
        return len(self.callers)

    def match(self, token: str | None) -> Caller | None:
        """The caller holding ``token`` (every token compared, in constant time each); the
        default caller when no token is configured; None when it matches none."""
        if not self.required:
            return self.callers[0]
        found = None
        given = (token or "").encode()
        for caller in self.callers:
            if caller.token is not None and hmac.compare_digest(given, caller.token.encode()):
                found = caller
        return found if token else None

    @classmethod
    def load(cls, env_token: str | None, tokens_file: Path | None) -> Callers:
        """The env token (caller ``default``) and the file's ``<name> <token>`` lines."""
        callers = [Caller(DEFAULT_NAME, "", env_token)] if env_token else []
        if tokens_file is not None:
            callers += _read_tokens_file(tokens_file)
        names = [c.name for c in callers]
        tokens = [c.token for c in callers]
        if len(set(names)) < len(names):
            twice = sorted({n for n in names if names.count(n) > 1})
            raise ConfigError(f"{tokens_file}: two callers are named {', '.join(twice)}")
        if len(set(tokens)) < len(tokens):
            raise ConfigError(f"{tokens_file}: two callers have the same token")
        return cls(callers)


def _read_tokens_file(path: Path) -> list[Caller]:
    """``<name> <token>`` per line (lines starting with ``#`` are comments); refused when
    other users may read or change it."""
    try:
        info = path.stat()
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read the tokens file {path}: {e}") from e
    if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO) and os.name == "posix":
        raise ConfigError(
            f"the tokens file {path} can be read or changed by other users; "
            f"make it private: chmod 600 {path}"
        )
    callers = []
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if len(words) != 2 or not _NAME.fullmatch(words[0]):
            raise ConfigError(
                f"{path}, line {number}: expected '<name> <token>', the name made of letters, "
                "digits, '.', '_' or '-' (at most 64)"
            )
        name, token = words
        if len(token) < MIN_TOKEN_CHARS:
            raise ConfigError(
                f"{path}, line {number}: the token of '{name}' is shorter than "
                f"{MIN_TOKEN_CHARS} characters; use a long random one "
                "(python -c 'import secrets; print(secrets.token_urlsafe(32))')"
            )
        if name == DEFAULT_NAME:
            raise ConfigError(
                f"{path}, line {number}: '{DEFAULT_NAME}' is the name of OPENMANUS_A2A_TOKEN's "
                "caller; choose another"
            )
        callers.append(Caller(name, name, token))
    if not callers:
        raise ConfigError(f"the tokens file {path} names no caller")
    return callers
