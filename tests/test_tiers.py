"""The test tiers (tests/tiers.py): exactly one per test, and a tier that matches what the test
starts. The last tests run pytest itself on small generated test files, as a contributor would
meet the rules."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.proc_utils import ROOT
from tests.tiers import TIERS, TierError, allowed_spawns, spawn_kind, tier_of


def test_a_test_without_tier_is_unit_and_a_marker_or_fixture_decides_otherwise() -> None:
    assert tier_of(["parametrize", "asyncio"], ["tmp_path"]) == "unit"
    assert tier_of(["e2e", "parametrize"], ["tmp_path"]) == "e2e"
    assert tier_of([], ["real_llm", "llama_pool"]) == "real_model"
    # The same tier from a module's pytestmark and from a fixture is still one tier.
    assert tier_of(["real_model", "real_model"], ["llama_pool"]) == "real_model"


@pytest.mark.parametrize(
    ("markers", "fixtures"),
    [(["e2e", "browser"], []), (["unit", "e2e"], []), (["e2e"], ["llama_pool"])],
)
def test_two_tiers_are_refused(markers: list[str], fixtures: list[str]) -> None:
    with pytest.raises(TierError, match="more than one tier"):
        tier_of(markers, fixtures)


def test_what_a_started_program_needs() -> None:
    assert spawn_kind(["/usr/bin/chromium", "--headless=new"]) == "browser"
    assert spawn_kind(["/bin/sh", "-c", "exec ...", "/usr/bin/chromium", "--x"]) == "browser"
    assert spawn_kind(["/venv/lib/python3.11/site-packages/playwright/driver/node", "x"]) == (
        "browser"
    )
    assert spawn_kind(["/v/bin/python", "-m", "llama_cpp.server", "--model", "m"]) == "real_model"
    assert spawn_kind(["/v/lib/python3.11/site-packages/ray/core/src/ray/raylet/raylet"]) == "ray"
    assert spawn_kind(["/usr/bin/python3", "/v/site-packages/ray/_private/log_monitor.py"]) == (
        "ray"
    )
    # A test's own files may mention anything: only the program (and python -m) decide.
    assert spawn_kind(["/bin/bash", "-c", "ls /tmp/test_chromium0/ray/"]) == "e2e"
    assert spawn_kind([]) == "e2e"


def test_each_tier_allows_its_own_programs_and_unit_none() -> None:
    assert allowed_spawns("unit") == set()
    assert allowed_spawns("e2e") == {"e2e"}
    for tier in ("browser", "ray", "real_model"):
        assert allowed_spawns(tier) == {"e2e", tier}
    assert set(TIERS) == {"unit", "e2e", "browser", "ray", "real_model"}


def _pytest(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """pytest with only the tiers plugin on ``directory`` (its own rootdir and ini)."""
    (directory / "pytest.ini").write_text("[pytest]\naddopts = --strict-markers -p tests.tiers\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTEST_XDIST_WORKER", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *args],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


@pytest.mark.e2e
def test_pytest_refuses_a_test_with_two_tiers(tmp_path: Path) -> None:
    (tmp_path / "test_two.py").write_text(
        textwrap.dedent("""
            import pytest
            pytestmark = pytest.mark.e2e

            @pytest.mark.browser
            def test_both():
                pass

            def test_fine():
                pass
        """)
    )
    run = _pytest(tmp_path)
    assert run.returncode == 4, run.stdout + run.stderr  # a usage error: nothing ran
    assert "test_two.py::test_both has more than one tier: browser, e2e" in run.stderr
    assert "test_fine" not in run.stderr


@pytest.mark.e2e
def test_a_test_that_starts_what_its_tier_does_not_allow_fails(tmp_path: Path) -> None:
    chromium = tmp_path / "bin" / "chromium"  # named like the browser, does nothing
    chromium.parent.mkdir()
    chromium.write_text("#!/bin/sh\nexit 0\n")
    chromium.chmod(0o755)
    (tmp_path / "test_spawns.py").write_text(
        textwrap.dedent(f"""
            import os, subprocess, sys
            import pytest

            def test_unit_in_process():
                assert sum(range(4)) == 6

            def test_unit_asking_ctypes_for_a_library():
                import ctypes.util  # runs ldconfig itself: a system query, not the test's
                assert ctypes.util.find_library("c")

            def test_unit_starting_python():
                subprocess.run([sys.executable, "-c", "pass"], check=True)

            def test_unit_using_os_system():
                os.system("true")

            @pytest.mark.e2e
            def test_e2e_starting_python():
                subprocess.run([sys.executable, "-c", "pass"], check=True)

            @pytest.mark.e2e
            def test_e2e_starting_chromium():
                subprocess.run([{str(chromium)!r}], check=True)

            @pytest.mark.browser
            def test_browser_starting_chromium():
                subprocess.run([{str(chromium)!r}], check=True)

            @pytest.fixture(scope="module")
            def helper():
                proc = subprocess.Popen(["sleep", "30"])
                yield proc
                proc.kill()
                proc.wait()

            def test_unit_with_a_module_fixture_that_starts_a_program(helper):
                assert helper.poll() is None
        """)
    )
    run = _pytest(tmp_path)
    out = run.stdout
    assert run.returncode == 1, out + run.stderr
    # Each test whose tier does not allow what it started fails at teardown, naming its tier.
    reports = {
        section.split(maxsplit=1)[0]: section for section in out.split("ERROR at teardown of ")[1:]
    }
    expected = {
        "test_unit_starting_python": "e2e",
        "test_unit_using_os_system": "e2e",
        "test_e2e_starting_chromium": "browser",
        "test_unit_with_a_module_fixture_that_starts_a_program": "e2e",
    }
    assert set(reports) == set(expected), out
    for name, needed in expected.items():
        assert f"mark it @pytest.mark.{needed} " in reports[name], reports[name]
    assert out.rstrip().splitlines()[-1].startswith("8 passed, 4 errors"), out
