"""Counting prompt tokens locally (OpenAI's chat accounting), so a request can be checked
against the context window; exact only for OpenAI's tokenizers (see docs/llm.md)."""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping
from concurrent.futures import Future
from fractions import Fraction
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote_to_bytes

from app.logger import logger

if TYPE_CHECKING:
    from tiktoken import Encoding

#: Tokens every chat message costs besides its fields (the role/separator framing).
MESSAGE_OVERHEAD = 4
#: Tokens that prime the assistant's reply, added once per request.
REPLY_PRIMING = 3
#: Tokens for the wrapper the server puts around tool definitions, added once when tools exist.
TOOLS_OVERHEAD = 12
#: Seconds a load may take before the counter settles for estimates (tiktoken's download has
#: no timeout of its own).
DEFAULT_LOAD_TIMEOUT = 20.0
#: Unknown tokenizers count as ``cl100k_base`` times this: smaller vocabularies (Llama 2,
#: Mistral's 32k) need up to a quarter more tokens, and a high estimate only compacts earlier.
ESTIMATE_MARGIN = 1.25
#: Size assumed for an image whose bytes are not at hand: 765 tokens, a middling screenshot.
DEFAULT_IMAGE_SIZE = (1024, 1024)

_LOW_DETAIL_TOKENS = 85
_TILE_TOKENS = 170
_TILE_SIDE = 512
_MAX_SIDE = 2048
_SHORT_SIDE = 768
_CACHE_SIZE = 4096
# Enough base64 for any PNG/GIF/WebP header and most JPEG SOF markers (48 KiB decoded).
_B64_PREFIX = 65536

# Model families served with o200k_base that tiktoken may not list yet (new snapshots, aliases).
_O200K_MODEL = re.compile(r"^(?:ft:)?(?:chatgpt-4o|gpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|o[1-9])(?:\b|$)")
# Scripts where a token is about one character: CJK, kana, hangul, fullwidth forms.
_WIDE_CHARS = re.compile(
    r"[\u1100-\u11ff\u2e80-\u2fdf\u3000-\u9fff\ua000-\ua4cf\uac00-\ud7af\uf900-\ufaff"
    r"\ufe30-\ufe4f\uff00-\uffef\U00020000-\U0003ffff]+"
)


_Loaded = tuple["Encoding | None", str | None]  # the encoding, or None and why
_LOCK = threading.Lock()
#: One load per encoding for the whole process; a load waited for in vain is in ``_GAVE_UP``.
_LOADS: dict[str, Future[_Loaded]] = {}
_GAVE_UP: set[str] = set()
_WARNED: set[str] = set()


def _load(name: str) -> _Loaded:
    try:
        # app.token_vocab and tiktoken load with the first count, not at start-up (~12 ms
        # and ~15-30 ms measured with the agent imported).
        from app.token_vocab import BUNDLED_ENCODINGS, load_bundled

        if name in BUNDLED_ENCODINGS:  # never downloaded, even if the package is missing
            return load_bundled(name)
        import tiktoken

        return tiktoken.get_encoding(name), None
    except BaseException as exc:  # a worker thread must never die silently
        return None, f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _obtain(name: str, timeout: float) -> _Loaded:
    """The process-wide encoding ``name``, or ``(None, reason)`` when it cannot be had."""
    with _LOCK:
        future = _LOADS.get(name)
        if future is None:
            future = _LOADS[name] = Future()
            threading.Thread(
                target=lambda: future.set_result(_load(name)),
                name=f"tiktoken-load-{name}",
                daemon=True,
            ).start()
    try:
        # Once one caller gave up waiting, later counters do not block again on the same load.
        return future.result(0.0 if name in _GAVE_UP else timeout)
    except TimeoutError:
        _GAVE_UP.add(name)
        return None, f"loading did not finish within {timeout:g} s"


def _warn_once(name: str, model: str, reason: str) -> None:
    with _LOCK:
        if name in _WARNED:
            return
        _WARNED.add(name)
    from app.token_vocab import BUNDLED_ENCODINGS, VOCAB_PACKAGE  # see _load_into

    remedy = (
        f"Reinstall the {VOCAB_PACKAGE} package to count exactly."
        if name in BUNDLED_ENCODINGS
        else "To count exactly offline, put the encoding file into a directory named by "
        "TIKTOKEN_CACHE_DIR."
    )
    logger.warning(
        f"Token counts for model {model!r} are estimates: tiktoken encoding {name!r} could not "
        f"be loaded ({reason}). {remedy}"
    )


def register_encoding(encoding: Encoding, name: str | None = None) -> None:
    """Make ``encoding`` the process-wide encoding for ``name`` (default: its own name): for
    a local vocabulary, and tests."""
    future: Future[_Loaded] = Future()
    future.set_result((encoding, None))
    with _LOCK:
        key = name or encoding.name
        _LOADS[key] = future
        _GAVE_UP.discard(key)
        _WARNED.discard(key)


def clear_encoding_cache() -> None:
    """Forget loaded and failed encodings, so the next counter tries to load again."""
    with _LOCK:
        _LOADS.clear()
        _GAVE_UP.clear()
        _WARNED.clear()


def model_encoding_name(model: str) -> str | None:
    """The tiktoken encoding ``model`` really uses (tiktoken's mapping, then OpenAI's model
    families), or None when unknown. A provider prefix (``openai/gpt-4o``) is ignored."""
    name = (model or "").strip().rsplit("/", 1)[-1].lower()
    try:
        from tiktoken.model import encoding_name_for_model  # see _load_into

        return encoding_name_for_model(name)
    except Exception:  # unknown model (KeyError) or tiktoken unusable
        pass
    return "o200k_base" if _O200K_MODEL.match(name) else None


def estimate_text_tokens(text: str) -> int:
    """About 4 ASCII characters, 2 other characters or 1 CJK character per token; >= 1."""
    if not text:
        return 0
    length = len(text)
    if text.isascii():
        return (length + 3) // 4
    wide = sum(map(len, _WIDE_CHARS.findall(text)))
    ascii_chars = len(text.encode("ascii", "ignore"))
    other = length - wide - ascii_chars
    return max(1, (ascii_chars + 2 * other + 3) // 4 + wide)


def image_tokens(width: int, height: int, detail: str = "high") -> int:
    """85 at low detail, else 170 per 512-px tile plus 85, after scaling down to fit 2048x2048
    and then a shorter side of 768 (exact arithmetic, so borders do not wobble)."""
    if detail == "low" or width <= 0 or height <= 0:
        return _LOW_DETAIL_TOKENS
    w, h = Fraction(width), Fraction(height)
    longest = max(w, h)
    if longest > _MAX_SIDE:
        w, h = w * _MAX_SIDE / longest, h * _MAX_SIDE / longest
    shortest = min(w, h)
    if shortest > _SHORT_SIDE:
        w, h = w * _SHORT_SIDE / shortest, h * _SHORT_SIDE / shortest
    tiles = math.ceil(w / _TILE_SIDE) * math.ceil(h / _TILE_SIDE)
    return _TILE_TOKENS * tiles + _LOW_DETAIL_TOKENS


def image_size(data: bytes) -> tuple[int, int] | None:
    """``(width, height)`` from a PNG, JPEG, GIF or WebP header; None if not recognised."""
    size: tuple[int, int] | None = None
    try:
        if data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR" and len(data) >= 24:
            size = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
        elif data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
            size = int.from_bytes(data[6:8], "little"), int.from_bytes(data[8:10], "little")
        elif data[:4] == b"RIFF" and data[8:12] == b"WEBP":
            size = _webp_size(data)
        elif data[:2] == b"\xff\xd8":
            size = _jpeg_size(data)
    except (IndexError, TypeError, ValueError):
        return None
    return size if size is not None and size[0] > 0 and size[1] > 0 else None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8 " and len(data) >= 30 and data[23:26] == b"\x9d\x01\x2a":
        width = int.from_bytes(data[26:28], "little") & 0x3FFF
        height = int.from_bytes(data[28:30], "little") & 0x3FFF
        return width, height
    if chunk == b"VP8L" and len(data) >= 25 and data[20] == 0x2F:
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X" and len(data) >= 30:
        width = int.from_bytes(data[24:27], "little") + 1
        height = int.from_bytes(data[27:30], "little") + 1
        return width, height
    return None


# Start-of-frame markers carry the size; C4 (DHT), C8 (JPG) and CC (DAC) do not.
_JPEG_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    pos, end = 2, len(data)
    while pos < end:
        if data[pos] != 0xFF:
            return None  # not at a marker: corrupt or truncated
        while pos < end and data[pos] == 0xFF:  # fill bytes
            pos += 1
        if pos >= end:
            return None
        marker = data[pos]
        pos += 1
        if marker == 0x01 or 0xD0 <= marker <= 0xD8:  # stand-alone markers
            continue
        if marker in (0xD9, 0xDA):  # end of image / start of scan: no frame header before
            return None
        if pos + 2 > end:
            return None
        length = int.from_bytes(data[pos : pos + 2], "big")
        if length < 2:
            return None
        if marker in _JPEG_SOF:
            if pos + 7 > end:
                return None
            height = int.from_bytes(data[pos + 3 : pos + 5], "big")
            width = int.from_bytes(data[pos + 5 : pos + 7], "big")
            return width, height
        pos += length
    return None


def _size_from_url(url: str) -> tuple[int, int] | None:
    """Image size from a data URL or bare base64; None for remote URLs and bad data."""
    if url.startswith(("http://", "https://")):
        return None
    if url.startswith("data:"):
        header, sep, payload = url.partition(",")
        if not sep:
            return None
        if ";base64" not in header:
            return image_size(unquote_to_bytes(payload))
    else:
        payload = url  # bare base64, as tools hand images over
    try:
        prefix = payload[:_B64_PREFIX]
        size = image_size(base64.b64decode(prefix[: len(prefix) // 4 * 4]))
        if size is None and len(payload) > _B64_PREFIX:  # a JPEG with big metadata first
            size = image_size(base64.b64decode(payload))
        return size
    except (binascii.Error, ValueError):
        return None


def _field(obj: Any, key: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(key)
    return getattr(obj, key, None)


def _compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


class TokenCounter:
    """Counts tokens of chat requests for one model, thread-safe, loading on first count (or
    :meth:`load`); ``encoding=`` injects a ready ``tiktoken.Encoding``."""

    def __init__(
        self,
        model: str,
        encoding_name: str | None = None,
        *,
        encoding: Encoding | None = None,
        load_timeout: float = DEFAULT_LOAD_TIMEOUT,
    ) -> None:
        self.model = model
        if encoding is not None and not encoding_name:
            encoding_name = encoding.name
        self._encoding_name = encoding_name
        #: The encoding is the model's own (given, or known); else counts carry ESTIMATE_MARGIN.
        self._native = bool(encoding_name) or model_encoding_name(model) is not None
        self._encoding: Encoding | None = encoding
        self._settled = encoding is not None
        self._load_timeout = load_timeout
        self._lock = threading.Lock()
        self._cache: OrderedDict[tuple[Any, ...], int] = OrderedDict()
        self._cache_lock = threading.Lock()

    def __repr__(self) -> str:
        state = "not loaded" if not self._settled else "exact" if self.exact else "estimated"
        return f"TokenCounter(model={self.model!r}, encoding={self.encoding_name!r}, {state})"

    @property
    def encoding_name(self) -> str:
        """The tiktoken encoding these counts use: the model's own, else ``cl100k_base`` as a
        stand-in (whose counts are then estimates, see :attr:`exact`)."""
        if self._encoding_name is None:
            self._encoding_name = model_encoding_name(self.model) or "cl100k_base"
        return self._encoding_name

    @property
    def loaded(self) -> bool:
        """True once loading has settled (an encoding, or the estimate): counting won't block."""
        return self._settled

    def load(self) -> None:
        """Load the encoding now; blocks up to ``load_timeout`` seconds, never raises."""
        if self._settled:
            return
        with self._lock:
            if self._settled:
                return
            name = self.encoding_name
            encoding, reason = _obtain(name, self._load_timeout)
            if encoding is None:
                _warn_once(name, self.model, reason or "unknown error")
            self._encoding = encoding
            self._settled = True

    @property
    def exact(self) -> bool:
        """Counts use the model's own tokenizer (loads first): only then may a count refuse a
        request locally; an estimate is for compaction and usage."""
        if not self._settled:
            self.load()
        return self._encoding is not None and self._native

    @property
    def estimated(self) -> bool:
        """``not exact``: counts are estimates (loads first)."""
        return not self.exact

    @property
    def signature(self) -> tuple[str, bool, bool]:
        """What a count depends on: two counters with equal signatures count alike, so counts
        cached on a message (``app.llm.openai.wire``) are reused across counters and agents."""
        if not self._settled:
            self.load()
        return (self.encoding_name, self._encoding is not None, self._native)

    def count_text(self, text: str) -> int:
        """Tokens of ``text`` (special-token strings count as ordinary text)."""
        if not text:
            return 0
        if type(text) is not str:  # str subclasses (enums) may hash by something else
            text = str.__str__(text) if isinstance(text, str) else str(text)
        if not self._settled:
            self.load()
        encoding = self._encoding
        if encoding is None:
            return self._margin(estimate_text_tokens(text))
        key = (hash(text), len(text))
        with self._cache_lock:
            count = self._cache.get(key)
            if count is not None:
                self._cache.move_to_end(key)
                return self._margin(count)
        try:
            count = len(encoding.encode_ordinary(text))
        except Exception:  # never fail a request over counting
            return self._margin(estimate_text_tokens(text))
        self._remember(key, count)
        return self._margin(count)

    def _margin(self, count: int) -> int:
        if self._native:
            return count
        return math.ceil(count * ESTIMATE_MARGIN)

    def _remember(self, key: tuple[Any, ...], count: int) -> None:
        with self._cache_lock:
            self._cache[key] = count
            if len(self._cache) > _CACHE_SIZE:
                self._cache.popitem(last=False)

    def count_image(self, image: dict[str, Any] | str, detail: str = "auto") -> int:
        """Tokens of one image: an ``image_url`` object, a (data) URL, or bare base64 (bytes not
        at hand: :data:`DEFAULT_IMAGE_SIZE`). The object's ``detail`` wins: it is what is sent."""
        url: Any = image
        if isinstance(image, Mapping):
            if "image_url" in image:  # a whole content part
                return self.count_image(image["image_url"], detail)
            url = image.get("url")
            detail = image.get("detail") or detail
        if detail == "low":
            return _LOW_DETAIL_TOKENS
        if not isinstance(url, str) or not url:
            return image_tokens(*DEFAULT_IMAGE_SIZE)
        key = ("image", hash(url), len(url))
        with self._cache_lock:
            size = self._cache.get(key)
        if size is None:
            found = _size_from_url(url)
            width, height = found if found is not None else DEFAULT_IMAGE_SIZE
            size = image_tokens(width, height, "high")
            self._remember(key, size)
        return size

    def count_content(self, content: str | list[dict[str, Any]] | None) -> int:
        """Tokens of a message's content: text, or a list of OpenAI content parts."""
        if not content:
            return 0
        if isinstance(content, str):
            return self.count_text(content)
        if not isinstance(content, list | tuple):
            return self.count_text(str(content))
        total = 0
        for part in content:
            if isinstance(part, str):
                total += self.count_text(part)
                continue
            kind = _field(part, "type")
            if kind == "text":
                total += self.count_text(_field(part, "text") or "")
            elif kind == "image_url":
                total += self.count_image(_field(part, "image_url") or "")
            elif isinstance(part, Mapping):  # audio, files...: priced as their JSON text
                total += self.count_text(_compact_json(part))
        return total

    def count_message(self, message: dict[str, Any]) -> int:
        """Tokens of one chat message, overhead included (a ``base64_image`` as an image, so it
        counts the same before and after wire formatting)."""
        total = MESSAGE_OVERHEAD
        role = _field(message, "role")
        if role is not None:
            total += self.count_text(getattr(role, "value", role))
        total += self.count_content(_field(message, "content"))
        for key in ("name", "tool_call_id"):
            value = _field(message, key)
            if value:
                total += self.count_text(value)
        for call in _field(message, "tool_calls") or ():
            function = _field(call, "function")
            if function is None:
                continue
            total += self.count_text(_field(function, "name") or "")
            arguments = _field(function, "arguments")
            if arguments:
                if not isinstance(arguments, str):
                    arguments = _compact_json(arguments)
                total += self.count_text(arguments)
        image = _field(message, "base64_image")
        if image:
            total += self.count_image(image)
        return total

    def count_messages(self, messages: list[dict[str, Any]]) -> int:
        """Tokens of a whole request's messages, reply priming included."""
        return sum(self.count_message(message) for message in messages) + REPLY_PRIMING

    def count_tools(self, tools: list[dict[str, Any]] | None) -> int:
        """Tokens of the tool definitions (as compact JSON: errs high, the server's own
        rendering of tools costs less)."""
        if not tools:
            return 0
        return TOOLS_OVERHEAD + sum(self.count_text(_compact_json(tool)) for tool in tools)
