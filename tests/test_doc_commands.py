"""Every example command of README.md and docs/getting-started.md runs as documented.

The commands are the lines of the two pages' ``bash`` blocks (a trailing ``# comment`` is not
part of a command). Each is looked up in :data:`COMMANDS`, which says how the test runs it and
what it must see; the set-up commands (:data:`SETUP`) are the only ones not run. A command the
pages show that :data:`COMMANDS` lacks fails :func:`test_every_documented_command_is_mapped`,
and so does an entry for a command the pages no longer show. Command-like inline code in the
prose (``python -m app.web``) must be a block command too (placeholders such as ``"..."``,
``<id>`` and ``ARGS`` stand for any argument), so the prose cannot show a command that no test
runs.

How a command runs: ``bash -o pipefail -c COMMAND`` in a scratch directory laid out like a
checkout (``main.py``, ``run_flow.py``, ``run_mcp.py``, ``mkdocs.yml`` and ``docs/`` linked,
``.venv`` linked to the test's virtualenv, ``config/config.example.toml`` copied), with the
virtualenv's ``bin`` first on PATH (the pages' ``python`` is the virtualenv's), the variable
the pages' ``export`` sets, ``$OPENMANUS_CONFIG`` (documented) naming ``config/config.toml``
(the example copied, as the pages say, with ``base_url`` set to the scripted model server and
``[web] port = 0``) and ``$OPENMANUS_WORKSPACE`` (documented) naming the scratch
``workspace/``. The commands of one block run in that one directory, in order (so
``--list-sessions`` lists the runs before it), each with a deadline. A server (the web UI, the A2A
agent) is started, asked over HTTP and stopped; the A2A agent gets ``--port 0`` (its documented
default, 10000, could be taken on the machine running the suite). The MCP server over stdio is
started by a real MCP client, as any client would.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from app.testing import ScriptedLLMServer, call, text, tool_calls
from tests.conftest import TEST_API_KEY
from tests.test_main_e2e import child_env
from tests.test_run_flow_e2e import plan_call

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent
PAGES = (ROOT / "README.md", ROOT / "docs" / "getting-started.md")
VENV = Path(sys.executable).parent.parent
EXAMPLE = ROOT / "config" / "config.example.toml"
DEADLINE = 180.0  # seconds for one command (a loaded 2-core machine; most take 2-5)


# ---- reading the pages ----------------------------------------------------------------------


@dataclass(frozen=True)
class Block:
    """One ``bash`` block of a page: where it starts and its commands, in order."""

    page: str
    line: int
    commands: tuple[str, ...]

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


FENCE = re.compile(r"^(`{3,}|~{3,})\s*([^`\s]*)[^`]*$")
SHELL_LANGUAGES = {"bash", "sh", "shell", "console", "zsh"}


def strip_comment(line: str) -> str:
    """The command of a line, without a trailing ``# comment`` (a ``#`` in quotes stays)."""
    quote = ""
    for i, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def fenced_blocks(page: Path) -> Iterator[tuple[int, str, list[str]]]:
    """(first line number, language, lines) of each fenced block of ``page``."""
    fence, language, start, lines = "", "", 0, []
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        match = FENCE.match(line.strip())
        if not fence and match:
            fence, language, start, lines = match.group(1), match.group(2), number, []
        elif fence and line.strip() == fence:
            yield start, language, lines
            fence = ""
        elif fence:
            lines.append(line)


def blocks(page: Path) -> list[Block]:
    name = page.relative_to(ROOT).as_posix()
    found = []
    for start, language, lines in fenced_blocks(page):
        if language == "bash":
            commands = tuple(c for c in (strip_comment(line.strip()) for line in lines) if c)
            found.append(Block(name, start, commands))
    return found


ALL_BLOCKS = [block for page in PAGES for block in blocks(page)]


def normalized(command: str) -> str:
    """A command as its program sees it: the virtualenv's ``bin/`` and ``python -m`` of a
    tool dropped (``.venv/bin/python -m mkdocs`` is ``mkdocs``), spaces collapsed."""
    command = " ".join(command.split())
    command = re.sub(r"(^|\s)\.venv/bin/", r"\1", command)
    return re.sub(r"\bpython -m (mkdocs|pip)\b", r"\1", command)


#: Inline code that is a command (not a program's name alone: ``python``, ``bash``).
INLINE_COMMAND = re.compile(
    r"^(\.venv/bin/)?(python3?|bash|sh|pip|mkdocs|openmanus|echo|cp|curl|npx|uv)\s+\S"
    r"|^(\.venv/bin/)?openmanus$"
)


def inline_commands(page: Path) -> list[str]:
    kept, fence = [], False
    for line in page.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line.strip()):
            fence = not fence
        elif not fence:
            kept.append(line)
    prose = "\n".join(kept)
    return [span for span in re.findall(r"`([^`\n]+)`", prose) if INLINE_COMMAND.match(span)]


def covers(block_command: str, inline: str) -> bool:
    """Whether ``inline`` (placeholders allowed) is ``block_command`` or its beginning."""
    pattern = re.escape(normalized(inline))
    pattern = pattern.replace(re.escape('"..."'), r'"[^"]*"')
    pattern = re.sub(r"<[^>]+>", r"\\S+", pattern)
    pattern = pattern.replace("ARGS", ".*")
    return re.match(rf"{pattern}(\s|$)", normalized(block_command)) is not None


# ---- how each command runs -------------------------------------------------------------------


@dataclass
class Project:
    """The scratch checkout a block runs in, and what its commands left behind."""

    root: Path
    llm: ScriptedLLMServer
    env: dict[str, str]
    listed: list[str] = field(default_factory=list)  # ids, from the last --list-sessions

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    @property
    def config(self) -> Path:
        return self.root / "config" / "config.toml"

    def configure(self) -> None:
        """ "Then set model and base_url under [llm]": the example, with the scripted server."""
        example = (self.root / "config" / "config.example.toml").read_text(encoding="utf-8")
        config, edits = re.subn(
            r'^base_url = "https://api\.openai\.com/v1"',
            f'base_url = "{self.llm.base_url}"',
            example,
            flags=re.MULTILINE,
        )
        assert edits == 1, "config.example.toml no longer has the [llm] base_url line"
        self.config.write_text(config + "\n[web]\nport = 0\n", encoding="utf-8")

    def sessions(self) -> set[str]:
        return {p.stem for p in self.workspace.glob(".sessions/*.jsonl")}


Check = Callable[[Project, "subprocess.CompletedProcess[str]"], None]


@dataclass(frozen=True)
class Run:
    """A command that runs to its end: exit ``code``, then ``check``."""

    replies: Callable[[Project], list[Any]] = lambda project: []
    stdin: str | None = None
    code: int = 0
    check: Check | None = None
    prepare: Callable[[Project], None] | None = None
    as_command: Callable[[Project, str], str] | None = None  # the documented equivalent
    needs: tuple[str, ...] = ()  # optional modules (an extra run.sh installs)


@dataclass(frozen=True)
class Serve:
    """A server: started, its address read from stdout, ``probe``d, stopped with SIGTERM."""

    address: re.Pattern[str]
    probe: Callable[[Project, str], None]
    append: tuple[str, ...] = ()


@dataclass(frozen=True)
class StdioServer:
    """An MCP server over stdio: started by a real MCP client, which ``probe``s it."""

    probe: Callable[[Any, Project], Any]


Mapping = Run | Serve | StdioServer

ANSWER = "fizzbuzz.py prints 1 to 15, with Fizz for threes, Buzz for fives and FizzBuzz."
TASK = "Write fizzbuzz.py and run it"
FIZZBUZZ = (
    "for i in range(1, 16):\n"
    "    print('FizzBuzz' if i % 15 == 0 else 'Fizz' if i % 3 == 0"
    " else 'Buzz' if i % 5 == 0 else i)\n"
)


def fizzbuzz(project: Project, prefix: str = "") -> list[Any]:
    """The model writes fizzbuzz.py, runs it and answers (``prefix``: MCP tool names)."""
    create = {"command": "create", "path": "fizzbuzz.py", "file_text": FIZZBUZZ}
    return [
        tool_calls(call(f"{prefix}str_replace_editor", create)),
        tool_calls(call(f"{prefix}python_execute", {"code": "exec(open('fizzbuzz.py').read())"})),
        tool_calls(call(f"{prefix}terminate", {"status": "success"}), content=ANSWER),
    ]


def hello_over_mcp(project: Project) -> list[Any]:
    """The MCP agent, on our server's tools, writes hello.py, runs it and answers."""
    create = {"command": "create", "path": "hello.py", "file_text": "print('Hello!')\n"}
    return [
        tool_calls(call("mcp_openmanus_str_replace_editor", create)),
        tool_calls(call("mcp_openmanus_bash", {"command": "python3 hello.py"})),
        tool_calls(
            call("mcp_openmanus_terminate", {"status": "success"}), content="It says Hello!"
        ),
    ]


def said_hello(project: Project, done: subprocess.CompletedProcess[str]) -> None:
    assert done.stdout == "It says Hello!\n"
    assert (project.workspace / "hello.py").read_text() == "print('Hello!')\n"
    outputs = [m["content"] for m in project.llm.requests[-1].messages if m["role"] == "tool"]
    assert "Hello!" in str(outputs[-1]), outputs


def wrote_and_ran_fizzbuzz(project: Project) -> None:
    assert (project.workspace / "fizzbuzz.py").read_text() == FIZZBUZZ
    outputs = [m["content"] for m in project.llm.requests[-1].messages if m["role"] == "tool"]
    # The model read the program's output (as JSON text: a newline is written \\n).
    assert re.search(r"14(\n|\\n)FizzBuzz", str(outputs[-1])), outputs


def answered(expected: str = ANSWER, *, quiet: bool = False, file: str | None = None) -> Check:
    def check(project: Project, done: subprocess.CompletedProcess[str]) -> None:
        if file is None:
            assert done.stdout == expected + "\n"
        else:
            assert done.stdout == "" and (project.root / file).read_text() == expected + "\n"
        if quiet:
            assert done.stderr == "", done.stderr
        else:
            assert "Executing step 1/20" in done.stderr and "Tokens: " in done.stderr
        wrote_and_ran_fizzbuzz(project)

    return check


def lists_sessions(*, rows: int | None = None) -> Check:
    def check(project: Project, done: subprocess.CompletedProcess[str]) -> None:
        lines = done.stdout.splitlines()
        if rows is not None:
            assert len(lines) == rows, done.stdout
        assert lines and all(line.split()[0] in project.sessions() for line in lines), lines
        assert any(line.split()[4] == "finished" and line.endswith(TASK) for line in lines), lines
        assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr
        project.listed = [line.split()[0] for line in lines]

    return check


def copied_the_example(project: Project, done: subprocess.CompletedProcess[str]) -> None:
    assert project.config.read_bytes() == EXAMPLE.read_bytes()
    project.configure()


def resumed(project: Project, done: subprocess.CompletedProcess[str]) -> None:
    assert done.stdout == "Added tests.\n"
    assert f"Resumed session {project.listed[0]} (finished" in done.stderr
    users = [m["content"] for m in project.llm.requests[-1].messages if m["role"] == "user"]
    assert users[0] == TASK and "now add tests for it" in users, users  # one conversation
    assert project.sessions() == set(project.listed)  # the same session, carried on


def refused_no_task(project: Project, done: subprocess.CompletedProcess[str]) -> None:
    assert done.stdout == ""
    assert done.stderr == (
        'error: no task given: the input ended without one (or give it with -p "task")\n'
    )


def version(project: Project, done: subprocess.CompletedProcess[str]) -> None:
    assert re.fullmatch(r"OpenManus-py \S+\n", done.stdout), done.stdout


def charted(project: Project, done: subprocess.CompletedProcess[str]) -> None:
    assert done.stdout == "Charted sales.csv: visualization/Sales_by_month.png.\n"
    assert (project.workspace / "visualization" / "Sales_by_month.png").is_file()
    assert "[DATA_ANALYSIS] Chart the numbers in sales.csv" in done.stderr  # the plan, shown


def chart_replies(project: Project) -> list[Any]:
    chart = {"chartTitle": "Sales by month", "csvFilePath": "sales.csv"}
    return [
        plan_call("[DATA_ANALYSIS] Chart the numbers in sales.csv"),
        tool_calls(call("data_visualization", {"charts": [chart], "output_type": "png"})),
        tool_calls(call("terminate", {"status": "success"}), content="chart saved"),
        text("Charted sales.csv: visualization/Sales_by_month.png."),
    ]


def write_sales(project: Project) -> None:
    project.workspace.mkdir(exist_ok=True)
    (project.workspace / "sales.csv").write_text("month,sales\nJan,10\nFeb,14\nMar,9\n")


def built_the_site(project: Project, done: subprocess.CompletedProcess[str]) -> None:
    assert (project.root / "site" / "index.html").is_file()
    assert (project.root / "site" / "getting-started" / "index.html").is_file()


def http_get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
    """One GET, redirects not followed: (status, headers, body)."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        connection.request("GET", path or "/", headers=headers or {})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read().decode()
    finally:
        connection.close()


def http_post_json(url: str, body: dict[str, Any]) -> dict[str, Any]:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
    try:
        data = json.dumps(body)
        connection.request("POST", parts.path or "/", data, {"content-type": "application/json"})
        response = connection.getresponse()
        assert response.status == 200, response.status
        answer: dict[str, Any] = json.loads(response.read())
        return answer
    finally:
        connection.close()


def probe_web_ui(project: Project, login: str) -> None:
    token = login.split("?token=", 1)[1]
    base = login.split("?", 1)[0].rstrip("/")
    status, headers, _ = http_get(login)  # opening the printed address logs in
    assert status in (302, 303, 307) and "HttpOnly" in headers.get("set-cookie", ""), headers
    status, _, page = http_get(base + "/", {"authorization": f"Bearer {token}"})
    assert status == 200 and "<html" in page.lower()
    status, _, sessions = http_get(base + "/api/sessions", {"authorization": f"Bearer {token}"})
    assert status == 200 and isinstance(json.loads(sessions), list | dict), sessions
    assert http_get(base + "/api/sessions")[0] == 401  # without the token: nothing


def probe_a2a(project: Project, url: str) -> None:
    status, _, card = http_get(url.rstrip("/") + "/.well-known/agent-card.json")
    assert status == 200 and json.loads(card)["name"] == "Manus Agent", card
    project.llm.push(tool_calls(call("terminate", {"status": "success"}), content="Hello, agent."))
    message = {"messageId": "m1", "role": "user", "parts": [{"kind": "text", "text": "Say hi"}]}
    body = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}
    result = http_post_json(url, body)["result"]
    assert result["status"]["state"] == "completed", result
    assert result["artifacts"][-1]["parts"][0]["text"] == "Hello, agent."


async def probe_mcp_server(session: Any, project: Project) -> None:
    names = {tool.name for tool in (await session.list_tools()).tools}
    assert {"bash", "python_execute", "str_replace_editor", "terminate"} <= names, names
    result = await session.call_tool("bash", {"command": "pwd"})
    assert not result.is_error and str(project.workspace) in result.content[0].text


def as_main_py(project: Project, command: str) -> str:
    """``bash scripts/run.sh ARGS`` is ``.venv/bin/python main.py ARGS`` once .venv exists
    (README, getting-started): the set-up is not run, the arguments are."""
    return command.replace("bash scripts/run.sh ", ".venv/bin/python main.py ", 1)


def with_listed_id(project: Project, command: str) -> str:
    assert project.listed, "--resume <id> follows a --list-sessions in the docs"
    return command.replace("<id>", project.listed[0])


#: The set-up commands: the two scripts themselves, installs, the key's export.
SETUP = {
    "bash scripts/run.sh",
    "bash scripts/test.sh",
    "export OPENAI_API_KEY=sk-...",
    ".venv/bin/pip install -e '.[docs]'",
}

COMMANDS: dict[str, Mapping] = {
    "cp config/config.example.toml config/config.toml": Run(
        prepare=lambda project: project.config.unlink(), check=copied_the_example
    ),
    f'.venv/bin/python main.py -p "{TASK}" > answer.txt': Run(
        fizzbuzz, check=answered(file="answer.txt")
    ),
    ".venv/bin/python main.py --list-sessions": Run(check=lists_sessions()),
    '.venv/bin/python run_flow.py --data-analysis -p "Chart the numbers in sales.csv"': Run(
        chart_replies, prepare=write_sales, check=charted, needs=("matplotlib",)
    ),
    ".venv/bin/python -m app.mcp.server": StdioServer(probe_mcp_server),
    '.venv/bin/python run_mcp.py -p "Create hello.py and run it"': Run(
        hello_over_mcp, check=said_hello
    ),
    ".venv/bin/python -m app.web": Serve(
        re.compile(r"OpenManus web UI: (http://127\.0\.0\.1:\d+/\?token=\S+)"), probe_web_ui
    ),
    ".venv/bin/python -m protocol.a2a.app.main": Serve(
        re.compile(r"OpenManus A2A agent: (http://\S+/)"), probe_a2a, append=("--port", "0")
    ),
    ".venv/bin/python -m mkdocs build --strict": Run(check=built_the_site, needs=("mkdocs",)),
    f'bash scripts/run.sh -p "{TASK}"': Run(fizzbuzz, check=answered(), as_command=as_main_py),
    "python main.py": Run(fizzbuzz, stdin=f"{TASK}\nexit\n", check=answered()),
    f'python main.py -p "{TASK}"': Run(fizzbuzz, check=answered()),
    f'python main.py -p "{TASK}" -q > answer.txt': Run(
        fizzbuzz, check=answered(quiet=True, file="answer.txt")
    ),
    "python main.py --list-sessions": Run(check=lists_sessions()),
    "python main.py --resume <id>": Run(
        lambda project: [text("Added tests.")],
        stdin="now add tests for it\n",
        check=resumed,
        as_command=with_listed_id,
    ),
    "python main.py --list-sessions | head -1": Run(check=lists_sessions(rows=1)),
    'echo "" | python main.py': Run(code=2, check=refused_no_task),
    "python -m app.cli --version": Run(check=version),
    ".venv/bin/openmanus --version": Run(check=version),
}


# ---- running them ------------------------------------------------------------------------------


@pytest.fixture
def project(tmp_path: Path, llm_server: ScriptedLLMServer) -> Project:
    root = tmp_path / "checkout"
    (root / "config").mkdir(parents=True)
    shutil.copy(EXAMPLE, root / "config" / "config.example.toml")
    for name in ("main.py", "run_flow.py", "run_mcp.py", "mkdocs.yml", "docs"):
        (root / name).symlink_to(ROOT / name)
    (root / ".venv").symlink_to(VENV)
    env = child_env(tmp_path)
    env.update(
        PATH=os.pathsep.join([str(VENV / "bin"), env.get("PATH", os.defpath)]),
        OPENAI_API_KEY=TEST_API_KEY,  # the pages' `export OPENAI_API_KEY=...`
        OPENMANUS_CONFIG=str(root / "config" / "config.toml"),
        OPENMANUS_WORKSPACE=str(root / "workspace"),  # (documented) not the checkout's
    )
    project = Project(root, llm_server, env)
    project.configure()
    return project


def bash(command: str) -> list[str]:
    return ["bash", "-o", "pipefail", "-c", command]


def start(project: Project, command: str, *, stdin: bool = False) -> subprocess.Popen[str]:
    """``command`` under bash in the scratch checkout, in a session of its own (so everything
    it starts can be ended); its stdin is a pipe or /dev/null, never the suite's."""
    return subprocess.Popen(
        bash(command),
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=project.env,
        cwd=project.root,
        start_new_session=True,
    )


def stop(proc: subprocess.Popen[Any]) -> None:
    """End ``proc``'s process group (it was started in a session of its own)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


def run_to_end(project: Project, command: str, mapping: Run) -> None:
    for module in mapping.needs:
        pytest.importorskip(module)
    if mapping.prepare is not None:
        mapping.prepare(project)
    project.llm.push(*mapping.replies(project))
    if mapping.as_command is not None:
        command = mapping.as_command(project, command)
    proc = start(project, command, stdin=mapping.stdin is not None)
    try:
        out, err = proc.communicate(mapping.stdin, timeout=DEADLINE)
    finally:
        stop(proc)
    done = subprocess.CompletedProcess(command, proc.returncode, out, err)
    assert done.returncode == mapping.code, f"{command}\n--- stderr ---\n{err}"
    assert project.llm.remaining == 0, f"{command}: not every scripted reply was asked for"
    if mapping.check is not None:
        mapping.check(project, done)


def serve(project: Project, command: str, mapping: Serve) -> None:
    proc = start(project, " ".join(["exec", command, *mapping.append]))
    lines: queue.Queue[str | None] = queue.Queue()
    errors: list[str] = []

    def pump(stream: Any, into: Callable[[str | None], None]) -> None:
        for line in stream:
            into(line)
        into(None)

    threading.Thread(target=pump, args=(proc.stdout, lines.put), daemon=True).start()
    threading.Thread(target=pump, args=(proc.stderr, errors.append), daemon=True).start()
    try:
        address = None
        while address is None:
            try:
                line = lines.get(timeout=DEADLINE)
            except queue.Empty:
                pytest.fail(f"{command}: printed no address in {DEADLINE:g} s: {errors}")
            assert line is not None, f"{command} ended: {''.join(filter(None, errors))}"
            if match := mapping.address.search(line):
                address = match.group(1)
        mapping.probe(project, address)
    finally:
        stop(proc)
    assert "Traceback" not in "".join(filter(None, errors)), errors


def over_stdio(project: Project, command: str, mapping: StdioServer) -> None:
    from mcp import ClientSession, StdioServerParameters  # the MCP SDK (a dependency)
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command="bash", args=bash(command)[1:], env=project.env, cwd=str(project.root)
    )

    async def session(errlog: Any) -> None:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as client:
                await client.initialize()
                await mapping.probe(client, project)

    log = project.root.parent / "mcp-server.stderr"
    with log.open("w") as errlog:
        try:
            asyncio.run(asyncio.wait_for(session(errlog), DEADLINE))
        except BaseException as e:
            raise AssertionError(f"{command}: {e!r}; its stderr:\n{log.read_text()}") from e


@pytest.mark.timeout(1200)  # a block runs several programs; each has its own deadline
@pytest.mark.parametrize(
    "block",
    [b for b in ALL_BLOCKS if set(b.commands) - SETUP],
    ids=lambda block: block.id,
)
def test_documented_commands_run(block: Block, project: Project) -> None:
    for command in block.commands:
        mapping = COMMANDS.get(command)
        if command in SETUP:
            continue
        assert mapping is not None, f"{block.id}: no way to run {command!r} (add it to COMMANDS)"
        if isinstance(mapping, Run):
            run_to_end(project, command, mapping)
        elif isinstance(mapping, Serve):
            serve(project, command, mapping)
        else:
            over_stdio(project, command, mapping)


# ---- the pages and the table agree -------------------------------------------------------------


def test_every_documented_command_is_mapped() -> None:
    shown = {command for block in ALL_BLOCKS for command in block.commands}
    unmapped = sorted(shown - SETUP - set(COMMANDS))
    stale = sorted((set(COMMANDS) | SETUP) - shown)
    assert not unmapped, f"commands the pages show that no test runs: {unmapped}"
    assert not stale, f"COMMANDS or SETUP entries the pages no longer show: {stale}"


def test_commands_are_shown_one_way() -> None:
    """Commands are in ``bash`` blocks, one per line, without a ``$`` prompt, so the test
    above reads them all."""
    problems = []
    for page in PAGES:
        for start, language, lines in fenced_blocks(page):
            where = f"{page.name}:{start}"
            if language in SHELL_LANGUAGES - {"bash"} or (language == "" and lines):
                problems.append(f"{where}: a shell block is marked {language or 'nothing'}")
            if language == "bash":
                problems += [f"{where}: {line!r}" for line in lines if line.startswith("$ ")]
                problems += [f"{where}: {line!r}" for line in lines if line.rstrip().endswith("\\")]
    assert not problems, "commands go in ```bash blocks, one per line:\n" + "\n".join(problems)


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_inline_commands_are_block_commands(page: Path) -> None:
    shown = [c for block in ALL_BLOCKS for c in block.commands]
    setup = ("bash scripts/test.sh", "pip install", "python -m venv", "export ")
    missing = [
        span
        for span in inline_commands(page)
        if not normalized(span).startswith(setup) and not any(covers(c, span) for c in shown)
    ]
    assert not missing, f"{page.name} shows commands no block has (so no test runs): {missing}"


def test_run_sh_installs_what_the_commands_need() -> None:
    """The README's commands work after ``run.sh`` (plus the set-up commands the pages show
    next to them): every extra the mapped programs import is installed by one or the other."""
    run_sh = (ROOT / "scripts" / "run.sh").read_text(encoding="utf-8")
    [extras] = re.findall(r"^source scripts/setup-venv\.sh (\S+)$", run_sh, re.MULTILINE)
    installed = set(extras.split(","))
    for command in SETUP:
        if match := re.search(r"pip install -e '\.\[([\w,]+)\]'", command):
            installed |= set(match.group(1).split(","))
    needed = {"app.web": "web", "protocol.a2a": "a2a", "--data-analysis": "data", "mkdocs": "docs"}
    for command in COMMANDS:
        for word, extra in needed.items():
            if word in command:
                assert extra in installed, f"{command!r} needs the {extra} extra"
    assert {"browser", "search", "docker"} <= installed  # what Manus's own tools use
