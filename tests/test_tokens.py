"""Token counting: exact counts with a real (tiny) tiktoken vocabulary, the offline fallback,
loading from a pre-populated tiktoken cache, and the image formula and header parsing."""

from __future__ import annotations

import base64
import hashlib
import socket
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import tiktoken
import tiktoken.registry
from loguru import logger as loguru_logger
from tiktoken.load import load_tiktoken_bpe

from app.tokens import (
    DEFAULT_IMAGE_SIZE,
    MESSAGE_OVERHEAD,
    REPLY_PRIMING,
    TOOLS_OVERHEAD,
    TokenCounter,
    clear_encoding_cache,
    estimate_text_tokens,
    image_size,
    image_tokens,
    register_encoding,
)

# GPT-2 style pre-tokenizer: words with their leading space, numbers, punctuation runs, spaces.
PAT = r"""'s|'t| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
# Merges, in rank order; each is the concatenation of two tokens that exist before it.
MERGES = [
    b"he",
    b"ll",
    b"llo",
    b"hello",
    b"us",
    b"er",
    b"user",
    b" w",
    b"or",
    b"ld",
    b" wor",
    b" world",
    b"to",
    b"ol",
    b"tool",
]


def tiny_ranks() -> dict[bytes, int]:
    ranks = {bytes([b]): b for b in range(256)}
    for merged in MERGES:
        ranks[merged] = len(ranks)
    return ranks


def tiny_encoding(
    name: str = "omtest_tiny",
    cls: type[tiktoken.Encoding] = tiktoken.Encoding,
) -> tiktoken.Encoding:
    return cls(
        name, pat_str=PAT, mergeable_ranks=tiny_ranks(), special_tokens={"<|endoftext|>": 1000}
    )


class CountingEncoding(tiktoken.Encoding):
    """A real encoding that records which texts it was asked to tokenize."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seen: list[str] = []

    def encode_ordinary(self, text: str) -> list[int]:
        self.seen.append(text)
        return super().encode_ordinary(text)


# --- fixtures ------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _fresh_process_cache() -> Iterator[None]:
    clear_encoding_cache()
    yield
    clear_encoding_cache()


class NetGuard:
    """Blocks every connection and name lookup except loopback; records the attempts."""

    def __init__(self) -> None:
        self.attempts: list[str] = []


@pytest.fixture
def netguard(monkeypatch: pytest.MonkeyPatch) -> NetGuard:
    guard = NetGuard()
    real_connect = socket.socket.connect
    real_getaddrinfo = socket.getaddrinfo

    def connect(self: socket.socket, address: Any) -> Any:
        host = address[0] if isinstance(address, tuple) else str(address)
        if host in ("127.0.0.1", "::1"):
            return real_connect(self, address)
        guard.attempts.append(f"connect {host}")
        raise OSError(f"network blocked by test: {host}")

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host in ("127.0.0.1", "::1", b"127.0.0.1"):
            return real_getaddrinfo(host, *args, **kwargs)
        guard.attempts.append(f"resolve {host}")
        raise socket.gaierror(socket.EAI_NONAME, f"name lookup blocked by test: {host}")

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    return guard


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "tiktoken-cache"
    directory.mkdir()
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(directory))
    return directory


@pytest.fixture
def warnings_seen() -> Iterator[list[str]]:
    seen: list[str] = []

    def sink(message: Any) -> None:
        if message.record["name"] == "app.tokens":
            seen.append(message.record["message"])

    handler = loguru_logger.add(sink, level="WARNING", format="{message}")
    yield seen
    loguru_logger.remove(handler)


@pytest.fixture
def add_constructor(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., None]]:
    """Registers an encoding constructor with tiktoken's real plugin registry for one test."""
    tiktoken.registry.list_encoding_names()  # makes tiktoken discover its own constructors
    names: list[str] = []

    def add(name: str, constructor: Callable[[], dict[str, Any]]) -> None:
        names.append(name)
        assert tiktoken.registry.ENCODING_CONSTRUCTORS is not None
        monkeypatch.setitem(tiktoken.registry.ENCODING_CONSTRUCTORS, name, constructor)

    yield add
    for name in names:
        tiktoken.registry.ENCODINGS.pop(name, None)


# --- exact counts with a real tiny vocabulary ----------------------------------------------


@pytest.fixture
def counter() -> TokenCounter:
    return TokenCounter("gpt-4o", encoding=tiny_encoding())


def test_text_counts_are_exact(counter: TokenCounter) -> None:
    assert counter.estimated is False
    assert counter.encoding_name == "omtest_tiny"
    assert counter.count_text("") == 0
    assert counter.count_text("hello") == 1
    assert counter.count_text("user") == 1
    assert counter.count_text("hello world") == 2  # "hello" + " world"
    assert counter.count_text("hello there") == 6  # " there" is " ", "t", "he", "r", "e"
    assert counter.count_text("tool") == 1
    # Special-token text is ordinary text here: it must neither raise nor count as 1.
    assert counter.count_text("<|endoftext|>") == 13  # "<|" + 9 letters + "|>"


def test_message_counts_are_exact(counter: TokenCounter) -> None:
    user = {"role": "user", "content": "hello world"}
    assert counter.count_message(user) == MESSAGE_OVERHEAD + 1 + 2
    assert counter.count_messages([user]) == MESSAGE_OVERHEAD + 1 + 2 + REPLY_PRIMING == 10

    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "hello", "arguments": "{}"}},
            {
                "id": "call_2",
                "type": "function",
                "function": {"name": "tool", "arguments": '{"a":1}'},
            },
        ],
    }
    # role 9 bytes; hello=1 + "{}"=2; tool=1 + '{"' 2 + a 1 + '":' 2 + 1 1 + '}' 1 = 8
    assert counter.count_message(call) == 4 + 9 + (1 + 2) + (1 + 7)

    result = {"role": "tool", "content": "hello", "name": "hello", "tool_call_id": "call_1"}
    # tool=1, content 1, name 1, "call" 3 ("c", "a", "ll") + "_" 1 + "1" 1
    assert counter.count_message(result) == 4 + 1 + 1 + 1 + 5

    parts = {
        "role": "user",
        "content": [{"type": "text", "text": "hello"}, {"type": "text", "text": " world"}],
    }
    assert counter.count_message(parts) == 4 + 1 + 1 + 1
    assert counter.count_messages([user, call, result, parts]) == 7 + 24 + 12 + 7 + 3


def test_tool_definitions_are_counted_as_compact_json(counter: TokenCounter) -> None:
    assert counter.count_tools(None) == 0
    assert counter.count_tools([]) == 0
    tool = {"name": "hello"}
    # '{"' 2, name 4, '":"' 3, hello 1, '"}' 2
    assert counter.count_tools([tool]) == TOOLS_OVERHEAD + 12
    assert counter.count_tools([tool, tool]) == TOOLS_OVERHEAD + 24


def test_history_is_tokenized_incrementally() -> None:
    encoding = tiny_encoding("omtest_counting", CountingEncoding)
    counter = TokenCounter("gpt-4o", encoding=encoding)
    history = [
        {"role": "system", "content": "you are a tool"},
        {"role": "user", "content": "hello world"},
    ]
    first = counter.count_messages(history)
    assert sorted(encoding.seen) == sorted(["system", "you are a tool", "user", "hello world"])

    encoding.seen.clear()
    history.append({"role": "assistant", "content": "hello there"})
    second = counter.count_messages(history)
    assert encoding.seen == ["assistant", "hello there"]  # only the new message
    assert second == first + 4 + 9 + 6

    encoding.seen.clear()
    assert counter.count_messages(history) == second
    assert encoding.seen == []
    # Same length, different text: a different count, not a cache hit.
    assert counter.count_text("hello worle") == 4  # "hello", " wor", "l", "e"
    assert encoding.seen == ["hello worle"]


def test_registered_encoding_is_used_for_its_name_without_loading(netguard: NetGuard) -> None:
    register_encoding(tiny_encoding(), name="cl100k_base")
    counter = TokenCounter("gpt-4")
    assert counter.encoding_name == "cl100k_base"
    assert counter.count_text("hello world") == 2
    assert counter.estimated is False
    assert netguard.attempts == []


def test_model_to_encoding_name() -> None:
    assert TokenCounter("gpt-4o").encoding_name == "o200k_base"
    assert TokenCounter("openai/gpt-4o-mini").encoding_name == "o200k_base"
    assert TokenCounter("GPT-4.1").encoding_name == "o200k_base"
    assert TokenCounter("o4").encoding_name == "o200k_base"  # unknown to tiktoken, same family
    assert TokenCounter("o3-pro").encoding_name == "o200k_base"
    assert TokenCounter("gpt-5.2-codex").encoding_name == "o200k_base"
    assert TokenCounter("gpt-4").encoding_name == "cl100k_base"
    assert TokenCounter("gpt-3.5-turbo").encoding_name == "cl100k_base"
    assert TokenCounter("deepseek-chat").encoding_name == "cl100k_base"
    assert TokenCounter("claude-3-5-sonnet").encoding_name == "cl100k_base"
    assert TokenCounter("").encoding_name == "cl100k_base"
    assert TokenCounter("gpt-4o", "p50k_base").encoding_name == "p50k_base"


# --- offline fallback -----------------------------------------------------------------------


def test_offline_without_cache_estimates_and_warns_once(
    netguard: NetGuard, cache_dir: Path, warnings_seen: list[str]
) -> None:
    # A legacy encoding that is not bundled: tiktoken tries to download it, which fails.
    counter = TokenCounter("text-davinci-003")
    counter.load()
    assert counter.estimated is True and counter.exact is False
    assert netguard.attempts, "tiktoken should have tried to download the encoding"
    assert len(warnings_seen) == 1
    assert "p50k_base" in warnings_seen[0] and "TIKTOKEN_CACHE_DIR" in warnings_seen[0]

    attempts = len(netguard.attempts)
    assert counter.count_text("a" * 400) == 100
    assert counter.count_text("你好世界") == 4
    assert counter.count_text("hi") == 1
    assert counter.count_messages([{"role": "user", "content": "abcdefgh"}]) == 4 + 1 + 2 + 3
    # A second counter for the same encoding: no new download attempt, no second warning.
    other = TokenCounter("text-davinci-002")
    assert other.count_text("abcd") == 1
    assert other.estimated is True
    assert len(netguard.attempts) == attempts
    assert len(warnings_seen) == 1
    assert list(cache_dir.iterdir()) == []


def test_first_count_loads_lazily_and_unknown_encoding_estimates(
    warnings_seen: list[str],
) -> None:
    counter = TokenCounter("some-model", "omtest_no_such_encoding")
    assert counter.count_text("abcdefgh") == 2  # the count itself triggered the failed load
    assert counter.estimated is True
    assert len(warnings_seen) == 1 and "omtest_no_such_encoding" in warnings_seen[0]
    assert TokenCounter("x", "omtest_no_such_encoding").count_text("abc") == 1
    assert len(warnings_seen) == 1


def test_estimates() -> None:
    assert estimate_text_tokens("") == 0
    assert estimate_text_tokens("a") == 1
    assert estimate_text_tokens("abcd") == 1
    assert estimate_text_tokens("abcde") == 2
    assert estimate_text_tokens("你好世界") == 4
    assert estimate_text_tokens("こんにちは") == 5
    assert estimate_text_tokens("hi 你好") == 3  # 3 ASCII chars -> 1, plus 2 CJK
    assert estimate_text_tokens("héllo") == 2  # 4 ASCII + 1 other (half a token)
    assert estimate_text_tokens("é") == 1


def test_hanging_download_gives_up_at_the_deadline_and_is_not_waited_for_again(
    netguard: NetGuard,
    cache_dir: Path,
    add_constructor: Callable[..., None],
    warnings_seen: list[str],
) -> None:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    url = f"http://127.0.0.1:{server.getsockname()[1]}/hang.tiktoken"
    name = "omtest_hanging"

    def constructor() -> dict[str, Any]:
        # tiktoken's real download path; this server accepts and never answers.
        return {
            "name": name,
            "pat_str": PAT,
            "mergeable_ranks": load_tiktoken_bpe(url),
            "special_tokens": {},
        }

    add_constructor(name, constructor)
    try:
        counter = TokenCounter("m", name, load_timeout=0.3)
        counter.load()
        assert counter.estimated is True
        server.settimeout(10)
        connection, _ = server.accept()  # the download really was in flight
        assert len(warnings_seen) == 1 and "did not finish within 0.3 s" in warnings_seen[0]

        started = time.monotonic()
        later = TokenCounter("m", name)  # default deadline, but the load was given up on
        assert later.count_text("abcd") == 1
        assert time.monotonic() - started < 5
        assert later.estimated is True
        assert len(warnings_seen) == 1
        loader = [t for t in threading.enumerate() if t.name == f"tiktoken-load-{name}"]
        assert len(loader) == 1 and loader[0].is_alive()
    finally:
        if "connection" in locals():
            connection.close()
        server.close()
    loader[0].join(10)  # the closed connection ends the download with an error
    assert not loader[0].is_alive()
    assert netguard.attempts == []


# --- loading from a pre-populated TIKTOKEN_CACHE_DIR ----------------------------------------


def _tiktoken_file(ranks: dict[bytes, int]) -> bytes:
    return b"".join(
        base64.b64encode(token) + b" " + str(rank).encode() + b"\n"
        for token, rank in sorted(ranks.items(), key=lambda item: item[1])
    )


def _cache_constructor(name: str, url: str, expected_hash: str) -> Callable[[], dict[str, Any]]:
    def constructor() -> dict[str, Any]:
        ranks = load_tiktoken_bpe(url, expected_hash=expected_hash)
        return {"name": name, "pat_str": PAT, "mergeable_ranks": ranks, "special_tokens": {}}

    return constructor


def test_prepopulated_cache_loads_offline(
    netguard: NetGuard,
    cache_dir: Path,
    add_constructor: Callable[..., None],
    warnings_seen: list[str],
) -> None:
    name = "omtest_cached"
    url = f"https://encodings.invalid/{name}.tiktoken"
    blob = _tiktoken_file(tiny_ranks())
    # tiktoken names cache files by the SHA-1 of the URL and checks the SHA-256 of the content.
    (cache_dir / hashlib.sha1(url.encode()).hexdigest()).write_bytes(blob)
    add_constructor(name, _cache_constructor(name, url, hashlib.sha256(blob).hexdigest()))

    counter = TokenCounter("m", name)
    counter.load()
    assert counter.estimated is False
    assert counter.count_messages([{"role": "user", "content": "hello world"}]) == 10
    assert netguard.attempts == []
    assert warnings_seen == []


def test_corrupt_cache_file_falls_back_to_estimates(
    netguard: NetGuard,
    cache_dir: Path,
    add_constructor: Callable[..., None],
    warnings_seen: list[str],
) -> None:
    name = "omtest_corrupt"
    url = f"https://encodings.invalid/{name}.tiktoken"
    blob = _tiktoken_file(tiny_ranks())
    cached = cache_dir / hashlib.sha1(url.encode()).hexdigest()
    cached.write_bytes(blob[:-10])  # truncated: the hash check fails, tiktoken re-downloads
    add_constructor(name, _cache_constructor(name, url, hashlib.sha256(blob).hexdigest()))

    counter = TokenCounter("m", name)
    assert counter.count_text("hello world") == 3  # 11 ASCII characters, estimated
    assert counter.estimated is True
    assert netguard.attempts
    assert len(warnings_seen) == 1


# --- images ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("width", "height", "detail", "expected"),
    [
        (1024, 1024, "high", 765),  # -> 768x768, 2x2 tiles
        (2048, 4096, "high", 1105),  # -> 1024x2048 -> 768x1536, 2x3 tiles
        (4096, 8192, "auto", 1105),
        (512, 512, "high", 255),  # one tile, never scaled up
        (100, 100, "high", 255),
        (513, 512, "high", 425),
        (768, 1024, "high", 765),  # shortest side already 768
        (10000, 1000, "high", 765),  # -> 2048x204.8, 4x1 tiles
        (1024, 1024, "low", 85),
        (8000, 8000, "low", 85),
    ],
)
def test_image_token_formula(width: int, height: int, detail: str, expected: int) -> None:
    assert image_tokens(width, height, detail) == expected


def png(width: int, height: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data))
            + kind
            + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)  # 8-bit grey
    rows = (b"\x00" + b"\x80" * width) * height
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def gif(width: int, height: int) -> bytes:
    # Two-colour palette; every pixel is colour 0, coded as CLEAR, 0 so the table never grows.
    bits = 0
    nbits = 0
    out = bytearray()
    for code in [4, 0] * (width * height) + [5]:  # 3-bit codes: CLEAR=4, END=5
        bits |= code << nbits
        nbits += 3
        while nbits >= 8:
            out.append(bits & 0xFF)
            bits >>= 8
            nbits -= 8
    if nbits:
        out.append(bits)
    blocks = b"".join(
        bytes([len(out[i : i + 255])]) + out[i : i + 255] for i in range(0, len(out), 255)
    )
    return (
        b"GIF89a"
        + struct.pack("<HHBBB", width, height, 0x80, 0, 0)
        + b"\x00\x00\x00\xff\xff\xff"
        + b"\x2c"
        + struct.pack("<HHHHB", 0, 0, width, height, 0)
        + b"\x02"
        + blocks
        + b"\x00"
        + b"\x3b"
    )


def jpeg(width: int, height: int, metadata: int = 0) -> bytes:
    """A baseline greyscale JPEG; ``metadata`` bytes of APP1 come before the frame header."""

    def segment(marker: int, payload: bytes) -> bytes:
        return bytes([0xFF, marker]) + struct.pack(">H", len(payload) + 2) + payload

    app1 = segment(0xE1, b"Exif\x00\x00" + b"\x00" * metadata) if metadata else b""
    blocks = -(-width // 8) * -(-height // 8)
    # One-code Huffman tables: each block is DC "0" (no change) and AC "0" (end of block).
    nbits = 2 * blocks
    scan = b"\x00" * (nbits // 8) + (bytes([(1 << (8 - nbits % 8)) - 1]) if nbits % 8 else b"")
    return (
        b"\xff\xd8"
        + segment(0xE0, b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00")
        + app1
        + segment(0xDB, b"\x00" + b"\x01" * 64)
        + segment(0xC0, struct.pack(">BHHB", 8, height, width, 1) + b"\x01\x11\x00")
        + segment(0xC4, b"\x00" + b"\x01" + b"\x00" * 15 + b"\x00")
        + segment(0xC4, b"\x10" + b"\x01" + b"\x00" * 15 + b"\x00")
        + segment(0xDA, b"\x01\x01\x00\x00\x3f\x00")
        + scan
        + b"\xff\xd9"
    )


def webp(kind: str, width: int, height: int) -> bytes:
    if kind == "VP8X":
        payload = (
            b"\x10\x00\x00\x00"
            + (width - 1).to_bytes(3, "little")
            + (height - 1).to_bytes(3, "little")
        )
    elif kind == "VP8L":
        payload = b"\x2f" + ((width - 1) | (height - 1) << 14).to_bytes(4, "little") + b"\x00"
    else:  # "VP8 ": key frame tag, start code, 14-bit sizes with scale bits 0
        payload = (
            b"\x50\x01\x00" + b"\x9d\x01\x2a" + struct.pack("<HH", width, height) + b"\x00" * 8
        )
    chunk = kind.encode() + struct.pack("<I", len(payload)) + payload
    if len(payload) % 2:
        chunk += b"\x00"
    body = b"WEBP" + chunk
    return b"RIFF" + struct.pack("<I", len(body)) + body


def test_image_size_reads_headers() -> None:
    assert image_size(png(3, 2)) == (3, 2)
    assert image_size(gif(3, 2)) == (3, 2)
    assert image_size(jpeg(17, 9)) == (17, 9)
    assert image_size(jpeg(640, 480, metadata=5000)) == (640, 480)
    assert image_size(webp("VP8X", 300, 200)) == (300, 200)
    assert image_size(webp("VP8L", 5, 7)) == (5, 7)
    assert image_size(webp("VP8 ", 16, 12)) == (16, 12)
    assert image_size(webp("VP8X", 16384, 1)) == (16384, 1)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not an image",
        png(3, 2)[:20],
        jpeg(3, 2)[:30],
        b"\xff\xd8\xff\xd9",
        b"RIFF\x00\x00\x00\x00WEBPVP8 ",
        b"GIF89a\x01",
        png(0, 5),
    ],
)
def test_image_size_rejects_unknown_or_truncated_data(data: bytes) -> None:
    assert image_size(data) is None


def data_url(kind: str, data: bytes) -> str:
    return f"data:image/{kind};base64," + base64.b64encode(data).decode()


def test_images_in_messages_are_sized_from_their_bytes(counter: TokenCounter) -> None:
    big_png = data_url("png", png(1024, 1024))
    part = {"type": "image_url", "image_url": {"url": big_png}}
    message = {"role": "user", "content": [{"type": "text", "text": "hello"}, part]}
    assert counter.count_message(message) == 4 + 1 + 1 + 765

    # JPEG whose frame header sits behind 60 kB of metadata: beyond the quick header read.
    tall = data_url("jpeg", jpeg(2048, 4096, metadata=60000))
    assert counter.count_image({"url": tall}) == 1105
    assert counter.count_image({"url": tall, "detail": "low"}) == 85
    assert counter.count_image({"url": tall, "detail": "low"}, detail="high") == 85
    assert counter.count_image(tall, detail="low") == 85
    assert counter.count_image(data_url("gif", gif(3, 2))) == 255
    assert counter.count_image(data_url("webp", webp("VP8X", 4000, 1000))) == 765  # 4x2 -> 2x1
    # Bare base64 (how tools hand over screenshots) and the upstream base64_image key.
    bare = base64.b64encode(png(2048, 4096)).decode()
    assert counter.count_image(bare) == 1105
    assert (
        counter.count_message({"role": "user", "content": "hello", "base64_image": bare})
        == 4 + 1 + 1 + 1105
    )


def test_images_without_readable_bytes_use_the_default_size(counter: TokenCounter) -> None:
    default = image_tokens(*DEFAULT_IMAGE_SIZE)
    assert default == 765
    assert counter.count_image("https://example.com/cat.png") == default
    assert counter.count_image({"url": "https://example.com/cat.png", "detail": "low"}) == 85
    assert counter.count_image("data:image/png;base64,@@@not-base64@@@") == default
    assert counter.count_image(data_url("png", b"garbage")) == default
    assert counter.count_image({}) == default
    assert counter.count_content([{"type": "image_url", "image_url": {"url": ""}}]) == default
