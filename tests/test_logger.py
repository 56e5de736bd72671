"""Logger: redaction on every sink we add (tracebacks included), lazy log file, levels."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from loguru import logger as base_logger

from app.logger import define_log_level, logger, redact, register_secret

PROJECT_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def restore_logger() -> Iterator[None]:
    """Every test reconfigures the global logger; put back loguru's default afterwards."""
    yield
    base_logger.remove()
    # Like loguru's import-time handler, but resolving sys.stderr per write (pytest swaps it).
    base_logger.add(lambda message: sys.stderr.write(message), level="DEBUG")


def _fresh(code: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a new interpreter, where nothing has imported loguru yet."""
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


# --- redact() -------------------------------------------------------------------------------


def test_registered_secret_is_replaced() -> None:
    register_secret("registered-value-7f3a9")
    assert redact("token registered-value-7f3a9 used") == "token *** used"


def test_short_values_are_not_registered() -> None:
    register_secret("ab12")
    register_secret(None)
    register_secret("")
    assert redact("ab12 stays") == "ab12 stays"


def test_longest_registered_secret_wins() -> None:
    register_secret("overlap-secret")
    register_secret("overlap-secret-longer")
    assert redact("x overlap-secret-longer y") == "x *** y"


@pytest.mark.parametrize(
    ("text", "leak"),
    [
        ("Incorrect API key provided: sk-proj-AbCdEfGhIjKlMnOpQrStUv", "AbCdEfGhIjKlMnOpQrStUv"),
        ("headers={'Authorization': 'Bearer eyJhbGciOiJIUzI1NiJ9.payload'}", "eyJhbGciOi"),
        ("calling with api_key=plainvalue123 now", "plainvalue123"),
        ('{"api_key": "jsonvalue456", "model": "m"}', "jsonvalue456"),
        ("proxy http://user:hunter2pass@proxy.local:8080", "hunter2pass"),
        ("x-api-key: headervalue789", "headervalue789"),
    ],
)
def test_key_patterns_are_redacted(text: str, leak: str) -> None:
    cleaned = redact(text)
    assert leak not in cleaned
    assert "***" in cleaned


def test_ordinary_text_is_left_alone() -> None:
    text = "max_tokens=4096 skipped task-list; the password prompt appeared"
    assert redact(text) == text


@pytest.mark.parametrize(
    "text",
    [
        "environment variable OPENAI_API_KEY is not set",
        "[llm] api_key: environment variable OPENAI_API_KEY is not set (export it, or give a "
        "default with ${OPENAI_API_KEY:-value})",
        'api_key = "${OPENAI_API_KEY}"',
        "password: required",
    ],
)
def test_names_of_secrets_in_prose_stay_readable(text: str) -> None:
    assert redact(text) == text


def test_a_registered_value_is_redacted_inside_such_prose() -> None:
    register_secret("registered-in-prose-5e1d")
    text = "api_key: environment variable OPENAI_API_KEY was registered-in-prose-5e1d"
    assert redact(text) == "api_key: environment variable OPENAI_API_KEY was ***"
    assert redact("password: Hunter2") == "password: ***"


# --- sinks ----------------------------------------------------------------------------------


def test_console_output_is_redacted(capsys: pytest.CaptureFixture[str]) -> None:
    register_secret("console-secret-41b2")
    define_log_level("INFO", logfile_level="OFF")
    logger.info("using console-secret-41b2 and sk-abcdefghijklmnopqrstuv")
    err = capsys.readouterr().err
    assert "using *** and ***" in err
    assert "console-secret-41b2" not in err
    assert "sk-abcdefghijklmnopqrstuv" not in err


def _raise_with(secret: str) -> None:
    local_note = "diagnose-would-show-this-local"
    raise ValueError(f"rejected {secret} " + local_note[:0])


def test_traceback_is_redacted_on_console_and_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    register_secret("traceback-secret-99c1")
    define_log_level("ERROR", "DEBUG", name="tb", log_dir=tmp_path)
    try:
        _raise_with("traceback-secret-99c1")
    except ValueError:
        logger.exception("call failed")
    err = capsys.readouterr().err
    (log_file,) = tmp_path.iterdir()
    content = log_file.read_text(encoding="utf-8")
    for output in (err, content):
        assert "Traceback" in output
        assert "ValueError: rejected ***" in output
        assert "traceback-secret-99c1" not in output
        # diagnose=False: local variable values are never dumped next to the source.
        assert "diagnose-would-show-this-local" not in output


def test_records_reaching_other_sinks_have_redacted_messages() -> None:
    register_secret("other-sink-secret-5d")
    define_log_level("OFF", "OFF")
    seen: list[str] = []
    base_logger.add(lambda m: seen.append(m.record["message"]), level="DEBUG")
    logger.bind(user="x").warning("value other-sink-secret-5d here")
    assert seen == ["value *** here"]


# --- lazy file, naming, levels --------------------------------------------------------------


def test_log_file_is_created_on_first_record_only(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    define_log_level("OFF", "INFO", name="run", log_dir=log_dir)
    assert not log_dir.exists()
    logger.debug("below the file level")
    assert not log_dir.exists()
    logger.info("first record")
    files = list(log_dir.iterdir())
    assert len(files) == 1
    assert re.fullmatch(r"run_\d{14}\.log", files[0].name)
    assert "first record" in files[0].read_text(encoding="utf-8")
    assert "below the file level" not in files[0].read_text(encoding="utf-8")


def test_unnamed_log_file_is_just_the_timestamp(tmp_path: Path) -> None:
    define_log_level("OFF", "DEBUG", log_dir=tmp_path)
    logger.debug("hello")
    (log_file,) = tmp_path.iterdir()
    assert re.fullmatch(r"\d{14}\.log", log_file.name)


def test_console_level_filters(capsys: pytest.CaptureFixture[str]) -> None:
    define_log_level("WARNING", "OFF")
    logger.info("info-line")
    logger.warning("warning-line")
    err = capsys.readouterr().err
    assert "warning-line" in err
    assert "info-line" not in err
    assert "WARNING" in err


@pytest.mark.parametrize("off", ["OFF", "off", None])
def test_console_can_be_switched_off(
    off: str | None, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    define_log_level(off, "DEBUG", log_dir=tmp_path)
    logger.error("only-in-file")
    assert "only-in-file" not in capsys.readouterr().err
    (log_file,) = tmp_path.iterdir()
    assert "only-in-file" in log_file.read_text(encoding="utf-8")


def test_define_log_level_replaces_existing_handlers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    earlier: list[str] = []
    base_logger.add(earlier.append, level="DEBUG")
    define_log_level("INFO", "OFF")
    logger.info("after")
    assert earlier == []
    assert "after" in capsys.readouterr().err


def test_messages_below_level_are_not_formatted() -> None:
    calls: list[str] = []

    class Costly:
        def __format__(self, spec: str) -> str:
            calls.append("format")
            return "costly"

    define_log_level("INFO", "OFF")
    logger.debug("value {}", Costly())
    assert calls == []
    logger.info("value {}", Costly())
    assert calls == ["format"]


def test_define_log_level_returns_the_redacting_logger(
    capsys: pytest.CaptureFixture[str],
) -> None:
    register_secret("returned-logger-secret")
    log = define_log_level("INFO", "OFF")
    log.info("returned-logger-secret")
    assert "returned-logger-secret" not in capsys.readouterr().err


@pytest.mark.e2e
def test_the_library_is_silent_until_the_application_turns_logging_on() -> None:
    """Our records reach no stderr until ``define_log_level`` or a handler the application
    adds; the application's own loguru records still reach loguru's default handler."""
    code = (
        "import sys\n"
        "import app.logger\n"
        "from loguru import logger\n"
        # A record is ours by the module logging it: run these lines as a module of app.
        "def ours(line):\n"
        "    exec('from app.logger import logger; ' + line, {'__name__': 'app.example'})\n"
        'ours(\'logger.debug("ours-debug"); logger.warning("ours-warning")\')\n'
        "logger.info('the-applications-own-record')\n"
        "lines = []\n"
        "logger.add(lines.append, format='{name} {message}')\n"
        "ours('logger.info(\"ours-to-the-user-handler\")')\n"
        "print(repr(lines))\n"
        "app.logger.define_log_level('INFO', 'OFF')\n"
        "ours('logger.info(\"ours-after-define-log-level\")')\n"
    )
    result = _fresh(code)
    assert result.returncode == 0, result.stderr
    assert "ours-debug" not in result.stderr and "ours-warning" not in result.stderr
    assert "the-applications-own-record" in result.stderr
    assert "app.example ours-to-the-user-handler" in result.stdout
    assert "ours-to-the-user-handler" not in result.stderr
    assert "ours-after-define-log-level" in result.stderr


# --- loguru imported on first need ------------------------------------------------------------


@pytest.mark.e2e
def test_records_below_the_levels_never_import_loguru() -> None:
    result = _fresh(
        "import sys\n"
        "from app.logger import define_log_level, log_enabled, logger\n"
        "define_log_level('WARNING', 'OFF')\n"
        "logger.debug('d'); logger.info('i'); logger.log('INFO', 'l'); logger.log(5, 't')\n"
        "print(log_enabled('INFO'), log_enabled('WARNING'), log_enabled('CRITICAL'))\n"
        "print('loguru' in sys.modules)\n"
        "logger.warning('first kept record')\n"
        "print('loguru' in sys.modules)\n"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "True", "True", "False", "True"]
    assert "first kept record" in result.stderr
    assert "WARNING" in result.stderr
    assert not any(level in result.stderr for level in ("DEBUG", "INFO", "Level 5"))


@pytest.mark.e2e
def test_a_handler_added_before_loguru_is_needed_is_kept() -> None:
    """The configuration asked for before loguru was loaded replaces only loguru's own
    import-time handler: a handler someone added meanwhile keeps its records."""
    result = _fresh(
        "from app.logger import define_log_level, logger, register_secret\n"
        "register_secret('late-handler-secret-42')\n"
        "define_log_level('WARNING', 'OFF')\n"
        "from loguru import logger as base\n"
        "lines = []\n"
        "base.add(lines.append, level='DEBUG', format='{message}')\n"
        "logger.info('for the user handler')\n"
        "logger.warning('warned late-handler-secret-42')\n"
        "print(repr(lines))\n"
    )
    assert result.returncode == 0, result.stderr
    assert "for the user handler" in result.stdout
    assert "warned ***" in result.stdout  # the patcher redacts for every sink
    # Ours at WARNING (redacted); loguru's own DEBUG handler is gone, so no INFO line here.
    assert "warned ***" in result.stderr
    assert "for the user handler" not in result.stderr
    assert "late-handler-secret-42" not in result.stdout + result.stderr


@pytest.mark.e2e
def test_an_unknown_level_is_refused_at_once() -> None:
    result = _fresh(
        "from app.logger import define_log_level\n"
        "try:\n    define_log_level('LOUD', 'OFF')\n"
        "except ValueError as e:\n    print('refused', e)\n"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("refused") and "LOUD" in result.stdout


@pytest.mark.e2e
def test_a_deferred_log_file_is_written_on_the_first_record(tmp_path: Path) -> None:
    result = _fresh(
        "import sys\n"
        "from app.logger import define_log_level, logger\n"
        f"define_log_level('OFF', 'DEBUG', 'deferred', log_dir={str(tmp_path)!r})\n"
        "assert 'loguru' not in sys.modules\n"
        "logger.opt(lazy=True).debug('lazy {}', lambda: 'value')\n"
        "logger.bind(task='t1').info('bound record')\n"
    )
    assert result.returncode == 0, result.stderr
    (log,) = tmp_path.glob("deferred_*.log")
    written = log.read_text(encoding="utf-8")
    assert "lazy value" in written and "bound record" in written
    assert result.stderr == ""


def test_a_secret_registered_after_a_redaction_is_redacted_too() -> None:
    register_secret("before-any-redaction-1")
    assert redact("a before-any-redaction-1") == "a ***"
    register_secret("after-a-redaction-22")
    assert redact("b after-a-redaction-22 before-any-redaction-1") == "b *** ***"
