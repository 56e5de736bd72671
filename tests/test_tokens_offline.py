# ruff: noqa: F811  (pytest fixtures imported from tests.test_tokens)
"""Exact counts without a network: OpenAI's vocabularies come from an installed package, are
identical to tiktoken's official files, load with no download attempt, and a damaged copy is
refused rather than used. Models whose tokenizer is unknown get marked, conservative estimates."""

from __future__ import annotations

import json
import math
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import tiktoken
import tiktoken.load
import tiktoken.registry

from app.testing.netguard import SITE_DIR
from app.token_vocab import (
    BUNDLED_ENCODINGS,
    load_bundled,
    read_ranks,
    tiktoken_file_bytes,
    vocab_file,
)
from app.tokens import ESTIMATE_MARGIN, TokenCounter, model_encoding_name
from tests.test_tokens import (  # noqa: F401  (fixtures)
    NetGuard,
    _fresh_process_cache,
    cache_dir,
    netguard,
    warnings_seen,
)

ROOT = Path(__file__).resolve().parent.parent
# Text that exercises every branch of the pre-tokenizer patterns.
CORPUS = [
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "def f(x):\n    return [i**2 for i in range(100)]  # 1+2+3==6\n",
    "café résumé naïve — Zürich",
    "日本語のトークナイザー 中文 한국어",
    "emoji 🚀🔥👍 mixed",
    "   leading\n\ttabs and  spaces   \r\n windows lines \r\n",
    "don't can't I'll we've 'TWAS",
    "ALLCAPS lowercase MixedCase 1234567890 3.14159 0xDEADBEEF",
    "a/b/c\n\n\n",
    "",
    '{"name":"str_replace_editor","arguments":{"path":"/tmp/x.py","old_str":"a\\tb"}}',
    "<|endoftext|> is text here",
    "Ω≈ç√∫ Икс हिन्दी العربية",
]


def _quicktok_file(ranks: dict[bytes, int], order: list[bytes]) -> bytes:
    """``ranks`` in the vocabulary package's file format, records in ``order``."""
    out = [struct.pack("<I", len(order))]
    for token in order:
        out += [struct.pack("<H", len(token)), token, struct.pack("<I", ranks[token])]
    return b"".join(out)


def _fake_package(root: Path, data: bytes) -> Path:
    """A ``quicktok`` package whose o200k vocabulary file holds ``data``; found first."""
    package = root / "quicktok"
    (package / "data").mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('must never be imported')\n")
    (package / "data" / "o200k.vocab").write_bytes(data)
    return package


# --- bundled vocabularies ------------------------------------------------------------------


def test_openai_models_count_exactly_offline(
    netguard: NetGuard, cache_dir: Path, warnings_seen: list[str]
) -> None:
    for model in (
        "gpt-4o",
        "openai/gpt-4o-mini",
        "gpt-4.1",
        "gpt-5",
        "o3",
        "ft:gpt-4o-mini:acme::abc",
        "gpt-4",
        "gpt-3.5-turbo",
        "gpt-oss-20b",
    ):
        counter = TokenCounter(model)
        counter.load()
        assert counter.exact is True and counter.estimated is False, model
        assert counter.encoding_name in BUNDLED_ENCODINGS
        assert counter.count_text("hello world") == 2
        assert counter.count_text("The quick brown fox jumps over the lazy dog.") == 10
    assert netguard.attempts == []
    assert list(cache_dir.iterdir()) == []  # tiktoken's cache was never used
    assert warnings_seen == []


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_bundled_vocabularies_are_tiktokens_official_files(
    name: str, netguard: NetGuard, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = vocab_file(name)
    assert path is not None
    ours, reason = load_bundled(name)
    assert ours is not None, reason
    # Give tiktoken our vocabulary as what its download returned: tiktoken itself checks it
    # against the SHA-256 it pins for OpenAI's file (a mismatch raises).
    blob = tiktoken_file_bytes(read_ranks(path.read_bytes()))
    asked: list[str] = []

    def downloaded(blobpath: str) -> bytes:
        asked.append(blobpath)
        return blob

    monkeypatch.setattr(tiktoken.load, "read_file", downloaded)
    tiktoken.registry.list_encoding_names()
    monkeypatch.delitem(tiktoken.registry.ENCODINGS, name, raising=False)
    official = tiktoken.get_encoding(name)
    monkeypatch.delitem(tiktoken.registry.ENCODINGS, name, raising=False)  # keep it test-local
    assert netguard.attempts == [] and [p.rsplit("/", 1)[-1] for p in asked] == [f"{name}.tiktoken"]

    assert ours.n_vocab == official.n_vocab and ours.max_token_value == official.max_token_value
    assert ours.special_tokens_set == official.special_tokens_set
    for token in official.special_tokens_set:
        assert ours.encode_single_token(token) == official.encode_single_token(token)
    for text in CORPUS:
        assert ours.encode_ordinary(text) == official.encode_ordinary(text), text
        assert ours.encode(text, allowed_special="all") == official.encode(
            text, allowed_special="all"
        )


def test_harmony_shares_o200k_ranks_with_its_own_special_tokens() -> None:
    harmony, reason = load_bundled("o200k_harmony")
    base, _ = load_bundled("o200k_base")
    assert harmony is not None and base is not None, reason
    assert harmony.encode_ordinary(CORPUS[2]) == base.encode_ordinary(CORPUS[2])
    assert harmony.encode_single_token("<|start|>") == 200006
    assert harmony.encode_single_token("<|call|>") == 200012
    assert harmony.n_vocab == 201088


@pytest.mark.e2e
def test_fresh_process_without_network_counts_exactly_and_prints_nothing(tmp_path: Path) -> None:
    """The whole path in a fresh interpreter under the real netguard, tiktoken's cache empty."""
    cache = tmp_path / "cache"
    cache.mkdir()
    code = (
        "import json\nfrom app.tokens import TokenCounter\n"
        "out = {}\n"
        "for model in ('gpt-4o', 'gpt-4', 'qwen2.5-7b-instruct'):\n"
        "    c = TokenCounter(model)\n"
        "    c.load()\n"
        "    n = c.count_messages([{'role': 'user', 'content': 'hello world'}])\n"
        "    out[model] = [c.exact, n]\n"
        "print(json.dumps(out))\n"
    )
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([SITE_DIR, str(ROOT)]),
        OPENMANUS_BLOCK_NETWORK="1",
        TIKTOKEN_CACHE_DIR=str(cache),
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    counts = json.loads(done.stdout)
    assert counts["gpt-4o"] == [True, 4 + 1 + 2 + 3]
    assert counts["gpt-4"] == [True, 10]
    exact, estimate = counts["qwen2.5-7b-instruct"]
    assert exact is False and estimate > 10
    assert list(cache.iterdir()) == []


# --- a damaged or changed vocabulary is refused ---------------------------------------------


def test_changed_vocabulary_file_is_refused_never_used(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    netguard: NetGuard,
    warnings_seen: list[str],
) -> None:
    ranks = {bytes([b]): b for b in range(256)} | {b"he": 256, b"llo": 257}
    _fake_package(tmp_path, _quicktok_file(ranks, list(ranks)))
    monkeypatch.syspath_prepend(str(tmp_path))
    assert vocab_file("o200k_base") == tmp_path / "quicktok" / "data" / "o200k.vocab"
    encoding, reason = load_bundled("o200k_base")
    assert encoding is None and "checksum differs" in (reason or "")

    counter = TokenCounter("gpt-4o")
    assert counter.count_text("a" * 40) == 10  # a character estimate, not a wrong "exact" one
    assert counter.exact is False
    assert len(warnings_seen) == 1 and "quicktok-v1" in warnings_seen[0]
    assert netguard.attempts == []  # no download instead


@pytest.mark.parametrize("data", [b"", b"\x05\x00\x00\x00\x01\x00a", b"\x00\x00\x00\x00extra"])
def test_malformed_vocabulary_file_is_refused(
    data: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_package(tmp_path, data)
    monkeypatch.syspath_prepend(str(tmp_path))
    encoding, reason = load_bundled("o200k_base")
    assert encoding is None and "could not be read" in (reason or "")


def test_rewritten_but_identical_vocabulary_is_verified_and_accepted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new package release may store the records differently: the content check decides."""
    original = vocab_file("o200k_base")
    assert original is not None
    ranks = read_ranks(original.read_bytes())
    _fake_package(tmp_path, _quicktok_file(ranks, sorted(ranks, key=lambda t: -ranks[t])))
    monkeypatch.syspath_prepend(str(tmp_path))
    encoding, reason = load_bundled("o200k_base")
    assert encoding is not None, reason
    assert encoding.encode_ordinary("hello world") == [24912, 2375]


# --- models whose tokenizer is unknown ------------------------------------------------------


@pytest.mark.parametrize(
    "model",
    [
        "local",
        "qwen2.5-0.5b-instruct",
        "llama-3.2-1b",
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "gemma-3-270m",
        "deepseek-chat",
        "claude-3-5-sonnet",
    ],
)
def test_unknown_tokenizers_are_conservative_marked_estimates(
    model: str, netguard: NetGuard, warnings_seen: list[str]
) -> None:
    assert model_encoding_name(model) is None
    estimate = TokenCounter(model)
    exact = TokenCounter("gpt-4")  # the stand-in encoding, counted exactly
    assert estimate.exact is False and estimate.estimated is True
    assert estimate.encoding_name == "cl100k_base"
    assert estimate.signature != exact.signature  # cached counts are never mixed up
    for text in CORPUS[:-1]:
        assert estimate.count_text(text) == math.ceil(exact.count_text(text) * ESTIMATE_MARGIN)
    history = [{"role": "user", "content": text} for text in CORPUS]
    assert (
        exact.count_messages(history)
        < estimate.count_messages(history)
        <= exact.count_messages(history) * 1.5
    )
    assert warnings_seen == [] and netguard.attempts == []


def test_an_encoding_the_caller_names_is_trusted_as_exact() -> None:
    counter = TokenCounter("my-finetune", "o200k_base")
    assert counter.exact is True
    assert counter.count_text("hello world") == 2
