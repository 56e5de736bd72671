"""The endpoint capability cache: persistence, expiry, concurrency and a hostile file system."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from app.llm import endpoint_memory
from app.llm.endpoint_memory import (
    DEFAULT_TTL,
    EndpointMemory,
    default_cache_path,
    default_memory,
    normalize_base_url,
)

ROOT = Path(__file__).resolve().parent.parent
URL = "http://127.0.0.1:8080/v1"


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_remembered_refusals_survive_a_new_instance(tmp_path: Path) -> None:
    path = tmp_path / "cache" / "endpoints.json"
    memory = EndpointMemory(path)
    assert memory.refused(URL, "m") == frozenset()
    memory.remember(URL, "m", "stream_tools")
    memory.remember(URL, "m", "images")
    assert memory.refused(URL, "m") == {"stream_tools", "images"}
    assert memory.refused(URL, "other") == frozenset()
    assert EndpointMemory(path).refused(URL + "/", "m") == {"stream_tools", "images"}
    assert memory.persistent


def test_file_and_directory_are_private(tmp_path: Path) -> None:
    path = tmp_path / "new" / "endpoints.json"
    EndpointMemory(path).remember(URL, "m", "tools")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")] == []


def test_urls_are_normalised_and_never_store_credentials(tmp_path: Path) -> None:
    assert normalize_base_url("HTTPS://User:Secret@API.Example.COM:8443/V1/?key=sk-x#f") == (
        "https://api.example.com:8443/V1"
    )
    assert normalize_base_url("http://[::1]:8000/") == "http://[::1]:8000"
    path = tmp_path / "endpoints.json"
    memory = EndpointMemory(path)
    memory.remember("https://user:hunter22@Host.example/v1/?api-key=sk-abcdef", "m", "tools")
    assert memory.refused("https://host.example/v1", "m") == {"tools"}
    text = path.read_text()
    assert "hunter22" not in text and "sk-abcdef" not in text and "user" not in text


def test_entries_expire(tmp_path: Path) -> None:
    clock = Clock()
    path = tmp_path / "endpoints.json"
    memory = EndpointMemory(path, clock=clock)
    memory.remember(URL, "m", "stream")
    clock.now += DEFAULT_TTL - 1
    assert memory.refused(URL, "m") == {"stream"}
    clock.now += 2
    assert memory.refused(URL, "m") == frozenset()
    memory.remember(URL, "other", "tools")  # the write prunes the stale entry
    assert list(json.loads(path.read_text())["endpoints"]) == [f"{URL} other"]


def test_future_timestamps_are_not_trusted(tmp_path: Path) -> None:
    path = tmp_path / "endpoints.json"
    entry = {"base_url": URL, "model": "m", "features": {"tools": 1e12}}
    path.write_text(json.dumps({"version": 1, "endpoints": {f"{URL} m": entry}}))
    assert EndpointMemory(path).refused(URL, "m") == frozenset()


def test_forget_and_clear(tmp_path: Path) -> None:
    path = tmp_path / "endpoints.json"
    memory = EndpointMemory(path)
    memory.remember(URL, "a", "tools")
    memory.remember(URL, "b", "tools")
    memory.forget(URL + "/", "a")
    assert memory.refused(URL, "a") == frozenset()
    assert EndpointMemory(path).refused(URL, "b") == {"tools"}
    memory.clear()
    assert EndpointMemory(path).refused(URL, "b") == frozenset()


def test_deleting_the_file_clears_it_for_running_processes(tmp_path: Path) -> None:
    path = tmp_path / "endpoints.json"
    memory = EndpointMemory(path)
    memory.remember(URL, "m", "tools")
    path.unlink()
    assert memory.refused(URL, "m") == frozenset()


def test_unknown_feature_is_a_programming_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="Unknown endpoint feature"):
        EndpointMemory(tmp_path / "e.json").remember(URL, "m", "teleport")


def test_reads_are_cached_until_the_file_changes(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "endpoints.json"
    writer, reader = EndpointMemory(path), EndpointMemory(path)
    writer.remember(URL, "m", "tools")
    assert reader.refused(URL, "m") == {"tools"}
    opened: list[str] = []
    real_open = os.open

    def counting_open(file, *args, **kwargs):  # type: ignore[no-untyped-def]
        opened.append(str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(endpoint_memory.os, "open", counting_open)
    for _ in range(100):
        assert reader.refused(URL, "m") == {"tools"}
    assert opened == []
    monkeypatch.setattr(endpoint_memory.os, "open", real_open)
    writer.remember(URL, "m", "images")  # another writer: the reader sees the change
    assert reader.refused(URL, "m") == {"tools", "images"}


@pytest.mark.parametrize(
    "content",
    [b"{not json", b"\xff\xfe", b"[]", b'{"endpoints": []}', b"[" * 100_000, b"   "],
)
def test_corrupt_file_reads_as_empty_and_is_repaired(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "endpoints.json"
    path.write_bytes(content)
    memory = EndpointMemory(path)
    assert memory.refused(URL, "m") == frozenset()
    memory.remember(URL, "m", "tools")
    assert EndpointMemory(path).refused(URL, "m") == {"tools"}
    assert memory.persistent


def test_bad_entries_are_skipped_and_good_ones_kept(tmp_path: Path) -> None:
    path = tmp_path / "endpoints.json"
    clock = Clock()
    good = {"base_url": URL, "model": "m", "features": {"tools": clock.now, "warp": clock.now}}
    data = {
        "endpoints": {
            f"{URL} m": good,
            "x": "nope",
            "y": {"features": {"tools": "yesterday"}},
            "z": {"features": {"tools": True}},
        }
    }
    path.write_text(json.dumps(data))
    assert EndpointMemory(path, clock=clock).refused(URL, "m") == {"tools"}


def test_oversized_file_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "endpoints.json"
    path.write_bytes(b" " * (2 << 20))
    assert EndpointMemory(path).refused(URL, "m") == frozenset()


def test_symlinked_cache_file_is_never_read_or_written_through(tmp_path: Path) -> None:
    target = tmp_path / "precious.json"
    target.write_text(json.dumps({"endpoints": {f"{URL} m": {"features": {"tools": 1e9}}}}))
    before = target.read_text()
    path = tmp_path / "cache" / "endpoints.json"
    path.parent.mkdir()
    path.symlink_to(target)
    memory = EndpointMemory(path, clock=Clock(1e9))
    assert memory.refused(URL, "m") == frozenset()
    memory.remember(URL, "m", "images")
    assert memory.refused(URL, "m") == {"images"}  # kept in memory
    assert not memory.persistent
    assert target.read_text() == before
    assert path.is_symlink()


def test_unwritable_cache_falls_back_to_memory(tmp_path: Path) -> None:
    # A directory where the lock file belongs makes every write fail, even for root.
    path = tmp_path / "endpoints.json"
    (tmp_path / "endpoints.json.lock").mkdir()
    memory = EndpointMemory(path)
    memory.remember(URL, "m", "stream_tools")
    assert memory.refused(URL, "m") == {"stream_tools"}
    assert not memory.persistent
    memory.forget(URL, "m")
    assert memory.refused(URL, "m") == frozenset()
    assert not path.exists()


def test_cache_path_is_a_file_in_a_file(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    memory = EndpointMemory(blocker / "endpoints.json")
    memory.remember(URL, "m", "tools")
    assert memory.refused(URL, "m") == {"tools"}
    assert not memory.persistent


def test_default_path_follows_the_environment(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("OPENMANUS_CACHE_DIR", str(tmp_path / "a"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "b"))
    assert default_cache_path() == tmp_path / "a" / "endpoints.json"
    monkeypatch.delenv("OPENMANUS_CACHE_DIR")
    assert default_cache_path() == tmp_path / "b" / "openmanus" / "endpoints.json"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_path() == tmp_path / "home" / ".cache" / "openmanus" / "endpoints.json"


def test_default_memory_is_one_instance() -> None:
    assert default_memory() is default_memory()


WRITER = """
import sys
from pathlib import Path
from app.llm.endpoint_memory import EndpointMemory
path, worker, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
memory = EndpointMemory(path)
for i in range(count):
    memory.remember("http://127.0.0.1:9/v1", f"{worker}-{i}", "stream_tools")
print("ok")
"""


@pytest.mark.e2e
def test_concurrent_processes_keep_each_others_entries(tmp_path: Path) -> None:
    path = tmp_path / "endpoints.json"
    workers, count = 4, 25
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), f"w{n}", str(count)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(workers)
    ]
    try:
        outputs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert [out.strip() for out, _ in outputs] == ["ok"] * workers, outputs
    memory = EndpointMemory(path)
    missing = [
        (n, i)
        for n in range(workers)
        for i in range(count)
        if memory.refused("http://127.0.0.1:9/v1", f"w{n}-{i}") != {"stream_tools"}
    ]
    assert missing == []
    assert len(json.loads(path.read_text())["endpoints"]) == workers * count
