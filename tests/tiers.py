"""Test tiers: every test gets exactly one of ``unit``, ``e2e``, ``browser``, ``ray`` and
``real_model`` (a pytest plugin, loaded by ``tests/conftest.py``; see docs/testing.md).

A test's tier is the tier marker it carries (on the test or its module's ``pytestmark``) or the
one its fixtures imply (``FIXTURE_TIERS``); a test with neither is ``unit``. Two tiers is an
error at collection. What a test does is checked while it runs, so a tier cannot drift as tests
change: a ``unit`` test that starts any process, or a test that starts Chromium, Ray or the
llama server without being in that tier, fails with a message saying which marker it needs.

Under pytest-xdist (``--dist loadgroup``) each module runs on one worker (module-scoped
fixtures such as a browser start once), and the ``ray`` and ``real_model`` tiers each run on a
single worker: only one Ray and one set of llama servers exist at a time.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Generator, Iterable, Sequence
from pathlib import PurePath
from typing import Any

import pytest

__all__ = [
    "FIXTURE_TIERS",
    "TIERS",
    "TierError",
    "allowed_spawns",
    "spawn_kind",
    "tier_of",
]

#: The tiers, each with the help text pytest shows for its marker.
TIERS: dict[str, str] = {
    "unit": "in one process: no program is started (the default for a test with no tier)",
    "e2e": "starts real programs: our CLI, the shells and Pythons tools run, sandboxes, MCP "
    "servers, Node tools, Docker",
    "browser": "drives a real Chromium (needs /usr/bin/chromium)",
    "ray": "starts a local Ray cluster (the ray extra)",
    "real_model": "drives llama-cpp-python's server with small real models (set up by "
    "scripts/setup-real-model.sh)",
}

#: Fixtures that put a test in a tier by themselves (also when used through other fixtures).
FIXTURE_TIERS: dict[str, str] = {"llama_pool": "real_model"}

#: Tiers whose tests share one xdist worker (one Ray, one set of llama servers at a time).
_SHARED_GROUPS = ("ray", "real_model")
#: The order xdist workers take tests in: the longest groups first, so that the real-model
#: group (minutes on one worker) runs while the other worker does everything else.
_FIRST = ("real_model", "ray", "browser", "e2e", "unit")

_BROWSER_PROGRAMS = {"chromium", "chromium-browser", "chrome", "google-chrome", "headless_shell"}


class TierError(Exception):
    """A test has no tier or more than one."""


def tier_of(markers: Iterable[str], fixtures: Iterable[str]) -> str:
    """The one tier of a test carrying ``markers`` and using ``fixtures``."""
    found = {name for name in markers if name in TIERS}
    found |= {FIXTURE_TIERS[name] for name in fixtures if name in FIXTURE_TIERS}
    if len(found) > 1:
        raise TierError(f"has more than one tier: {', '.join(sorted(found))}")
    return found.pop() if found else "unit"


def spawn_kind(argv: Sequence[str]) -> str:
    """The tier a started program needs: ``browser``, ``ray``, ``real_model`` or ``e2e``."""
    if not argv:
        return "e2e"
    program = argv[0]
    if PurePath(program).name in _BROWSER_PROGRAMS or "playwright" in program:
        return "browser"
    # Our launcher starts Chromium through `sh -c '<move the DevTools pipe>' chromium ...`.
    if list(argv[1:2]) == ["-c"] and len(argv) > 3 and PurePath(argv[3]).name in _BROWSER_PROGRAMS:
        return "browser"
    if any("llama_cpp.server" in arg for arg in argv[:3]):
        return "real_model"
    if any(f"{os.sep}ray{os.sep}" in arg for arg in argv[:2]):
        return "ray"
    return "e2e"


def allowed_spawns(tier: str) -> set[str]:
    """The kinds of program (``spawn_kind``) a test of ``tier`` may start."""
    if tier == "unit":
        return set()
    if tier == "e2e":
        return {"e2e"}
    return {"e2e", tier}


# --- watching what a test starts -----------------------------------------------------------

_SPAWN_EVENTS = {"subprocess.Popen", "os.posix_spawn", "os.spawn", "os.system", "os.fork"}
_started: list[list[str]] | None = None  # programs the running test started (None: no test)


def _argv(event: str, args: tuple[Any, ...]) -> list[str]:
    if event == "subprocess.Popen":
        executable, command = args[0], args[1]
        words = [command] if isinstance(command, str | bytes) else list(command or ())
        if executable is not None:
            words[:1] = [executable]
        return [os.fsdecode(w) if isinstance(w, bytes | os.PathLike) else str(w) for w in words]
    if event == "os.posix_spawn":
        return [os.fsdecode(args[0]), *(os.fsdecode(a) for a in list(args[1])[1:])]
    if event == "os.spawn":
        return [os.fsdecode(args[1]), *(os.fsdecode(a) for a in list(args[2])[1:])]
    if event == "os.system":
        return ["/bin/sh", "-c", os.fsdecode(args[0])]
    return [f"<{event}>"]


#: Library modules that run system programs for their own queries (``uname -p`` the first time
#: anyone asks ``platform``, ``ldconfig`` in ``ctypes.util.find_library``, ``fc-list`` when
#: matplotlib builds its font cache): whichever test happens to ask first is not starting
#: programs of its own.
_SYSTEM_QUERIES = (
    f"{os.sep}platform.py",
    f"{os.sep}ctypes{os.sep}util.py",
    f"{os.sep}matplotlib{os.sep}font_manager.py",  # fc-list, building its font cache
)


def _system_query() -> bool:
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename.endswith(_SYSTEM_QUERIES):
            return True
        frame = frame.f_back
    return False


def _audit(event: str, args: tuple[Any, ...]) -> None:
    started = _started
    if started is None or event not in _SPAWN_EVENTS or _system_query():
        return
    try:
        started.append(_argv(event, args))
    except Exception:  # an unexpected argument shape: still a started program
        started.append([f"<{event}>"])


sys.addaudithook(_audit)


def _check_started(item: pytest.Item, started: list[list[str]]) -> None:
    tier = item.stash.get(_TIER, "unit")
    allowed = allowed_spawns(tier)
    wrong = [argv for argv in started if spawn_kind(argv) not in allowed]
    if not wrong:
        return
    needed = sorted({spawn_kind(argv) for argv in wrong})
    shown = "; ".join(" ".join(argv).replace("\n", "\\n")[:160] for argv in wrong[:3])
    advice = (
        f"mark it @pytest.mark.{needed[0]} (or its module's pytestmark)"
        if len(needed) == 1
        else f"it needs more than one tier ({', '.join(needed)}): split it"
    )
    pytest.fail(
        f"{item.nodeid} is in tier {tier!r} but started {len(wrong)} program(s) that tier does "
        f"not allow ({shown}): {advice}; see docs/testing.md",
        pytrace=False,
    )


# --- the plugin ----------------------------------------------------------------------------

_TIER = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    for name, text in TIERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    if config.pluginmanager.hasplugin("xdist"):
        # Workers take groups in collection order, which puts the longest first (below), not
        # in xdist's default order (the groups with the most tests first).
        config.option.loadscopereorder = False


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Give every test its tier marker (and its xdist group); two tiers is a usage error."""
    problems = []
    grouped = config.pluginmanager.hasplugin("xdist")
    for item in items:
        markers = [mark.name for mark in item.iter_markers()]
        try:
            tier = tier_of(markers, getattr(item, "fixturenames", ()))
        except TierError as e:
            problems.append(f"{item.nodeid} {e}")
            continue
        item.stash[_TIER] = tier
        if tier not in markers:
            item.add_marker(tier)
        if grouped:
            group = tier if tier in _SHARED_GROUPS else item.nodeid.split("::")[0]
            item.add_marker(pytest.mark.xdist_group(group))
    if problems:
        raise pytest.UsageError(
            "every test needs exactly one tier (docs/testing.md):\n  " + "\n  ".join(problems)
        )
    if hasattr(config, "workerinput"):  # an xdist worker: the slowest tiers start first
        items.sort(key=lambda item: _FIRST.index(item.stash[_TIER]))


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    global _started
    _started = []  # from the first fixture the test sets up, module and session ones too
    return (yield)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    global _started
    try:
        result = yield
    finally:
        started, _started = _started, None
    _check_started(item, started or [])
    return result
