"""Every example command of README.md and docs/*.md runs as documented.

The commands are the lines of the pages' ``bash`` blocks (a trailing ``# comment`` is not part
of a command; a line ending in ``\\`` or inside an open quote goes on on the next). Blocks the
page marks ``<!-- doc: not run: why -->`` (``tests/doc_blocks.py``: commands that install
things or run the test suite itself) are left out. Each command is looked up in
:data:`COMMANDS`, which says how the test runs it and what it must see; the set-up commands
(:data:`SETUP`) are the only others not run. A command the pages show that :data:`COMMANDS`
lacks fails :func:`test_every_documented_command_is_mapped`, and so does an entry for a command
the pages no longer show. A block whose commands belong together (a variable, a background
job) is mapped as a whole, by its first command, to a :class:`Script`. Command-like inline code
in the prose of README.md and getting-started.md (``python -m app.web``) must be a block
command too (placeholders such as ``"..."``, ``<id>`` and ``ARGS`` stand for any argument), so
the prose cannot show a command that no test runs.

How a command runs: ``bash -o pipefail -c COMMAND`` in a scratch directory laid out like a
checkout (``main.py``, ``run_flow.py``, ``run_mcp.py``, ``mkdocs.yml`` and ``docs/`` linked,
``.venv`` and ``.npm-tools`` linked to the test's, ``config/config.example.toml`` copied),
with the virtualenv's ``bin`` first on PATH (the pages' ``python`` is the virtualenv's), the
variable the pages' ``export`` sets, ``$OPENMANUS_CONFIG`` (documented) naming
``config/config.toml`` (the example copied, as the pages say, with ``base_url`` set to the
scripted model server and ``[web] port = 0``) and ``$OPENMANUS_WORKSPACE`` (documented) naming
the scratch ``workspace/``. The commands of one block run in that one directory, in order (so
``--list-sessions`` lists the runs before it), each with a deadline. A server (the web UI, the
A2A agent, our MCP server over HTTP) is started, asked over HTTP and stopped; a documented
fixed port (8000, 8765, 10000, 40123) becomes a free one. A command that talks to a server
(``curl``, ``run_mcp.py --connection http``) gets a real one started for it. The MCP server
over stdio is started by a real MCP client, as any client would.
"""

from __future__ import annotations

import asyncio
import contextlib
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
from tests.a2a_support import a2a_server
from tests.conftest import TEST_API_KEY
from tests.doc_blocks import ALL_BLOCKS as ALL_DOC_BLOCKS
from tests.doc_blocks import FENCE, PAGES, ROOT, fenced_blocks
from tests.mcp_helpers import http_server
from tests.npm_tools import NPM_DIR
from tests.otlp_receiver import OtlpReceiver
from tests.test_main_e2e import child_env
from tests.test_run_flow_e2e import plan_call
from tests.web_ui_helpers import WebApp, free_port

pytestmark = pytest.mark.e2e

#: The pages whose prose may show no command that no block has.
PROSE_PAGES = (ROOT / "README.md", ROOT / "docs" / "getting-started.md")
VENV = Path(sys.executable).parent.parent
EXAMPLE = ROOT / "config" / "config.example.toml"
DEADLINE = 180.0  # seconds for one command (a loaded 2-core machine; most take 2-5)


# ---- reading the pages ----------------------------------------------------------------------


@dataclass(frozen=True)
class Block:
    """One ``bash`` block of a page: where it starts, its commands in order, its text."""

    page: str
    line: int
    commands: tuple[str, ...]
    text: str = ""

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


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


def open_quote(text: str) -> str:
    """The quote still open at the end of ``text`` (``""``: none)."""
    quote = ""
    for char in text:
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
    return quote


def commands_of(text: str) -> tuple[str, ...]:
    """The commands of a block: one per line, a line ending in ``\\`` (outside quotes) or
    inside an open quote going on on the next; ``# comments`` left out."""
    commands: list[str] = []
    pending, joiner = "", ""
    for raw in text.splitlines():
        pending += joiner + (raw if joiner == "\n" else raw.strip())
        command = strip_comment(pending)  # a "#" inside quotes stays
        if open_quote(command):
            joiner = "\n"
            continue
        if command.endswith("\\"):
            pending, joiner = command[:-1].rstrip(), " "
            continue
        if command:
            commands.append(command)
        pending, joiner = "", ""
    return tuple(commands)


def blocks(page: Path) -> list[Block]:
    """The ``bash`` blocks of ``page`` that run (those marked ``not run`` are left out)."""
    name = page.relative_to(ROOT).as_posix()
    return [
        Block(name, b.line, commands_of(b.text), b.text)
        for b in ALL_DOC_BLOCKS
        if b.page == name and b.language == "bash" and b.runs
    ]


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
    #: Servers a command talks to (``curl``, ``--connection http``), stopped after the block.
    background: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    #: Documented addresses and values, and what stands for them in this run.
    substitutions: dict[str, str] = field(default_factory=dict)
    seen: dict[str, Any] = field(default_factory=dict)  # what a prepare left for a check

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
    """A server: started, its address read from its output (``stream``), ``probe``d, stopped
    with SIGTERM."""

    address: re.Pattern[str]
    probe: Callable[[Project, str], None]
    append: tuple[str, ...] = ()
    stream: str = "stdout"
    prepare: Callable[[Project], None] | None = None
    as_command: Callable[[Project, str], str] | None = None


@dataclass(frozen=True)
class Script:
    """A whole block, run as one bash script (its commands share variables and jobs); the
    set-up commands in it are left out."""

    replies: Callable[[Project], list[Any]] = lambda project: []
    prepare: Callable[[Project], None] | None = None
    check: Check | None = None


@dataclass(frozen=True)
class StdioServer:
    """An MCP server over stdio: started by a real MCP client, which ``probe``s it."""

    probe: Callable[[Any, Project], Any]


Mapping = Run | Serve | StdioServer | Script

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


def probe_mcp_over(transport: str, *, run_task: bool = False) -> Callable[[Project, str], None]:
    """A probe of our MCP server over ``http`` or ``sse``: a real MCP client lists and calls
    its tools (``run_task`` too: Manus on the scripted model)."""

    def probe(project: Project, url: str) -> None:
        from mcp import ClientSession  # the MCP SDK (a dependency; slow to import)
        from mcp.client.sse import sse_client
        from mcp.client.streamable_http import streamable_http_client

        async def session() -> None:
            connect = streamable_http_client(url) if transport == "http" else sse_client(url)
            async with connect as streams, ClientSession(streams[0], streams[1]) as client:
                await client.initialize()
                await probe_mcp_server(client, project)
                if run_task:
                    project.llm.push(terminate("Done from Manus."))
                    result = await client.call_tool("run_task", {"task": "Say done"})
                    assert "Done from Manus." in result.content[0].text, result

        asyncio.run(asyncio.wait_for(session(), DEADLINE))

    return probe


def terminate(answer: str) -> Any:
    return tool_calls(call("terminate", {"status": "success"}), content=answer)


def as_main_py(project: Project, command: str) -> str:
    """``bash scripts/run.sh ARGS`` is ``.venv/bin/python main.py ARGS`` once .venv exists
    (README, getting-started): the set-up is not run, the arguments are."""
    return command.replace("bash scripts/run.sh ", ".venv/bin/python main.py ", 1)


def with_listed_id(project: Project, command: str) -> str:
    assert project.listed, "--resume <id> follows a --list-sessions in the docs"
    return re.sub(r"<id>|\b\d{8}-\d{6}-[0-9a-f]{6}\b", project.listed[0], command)


def with_task(task: str) -> Callable[[Project, str], str]:
    """The documented placeholder ``"..."`` as a real task."""
    return lambda project, command: command.replace('"..."', f'"{task}"')


def any_free_port(project: Project, command: str) -> str:
    """A documented fixed port (``--port 8000``) as any free one."""
    return re.sub(r"--port \d+", "--port 0", command)


# ---- servers a command talks to ----------------------------------------------------------------


def a2a_agent(project: Project) -> None:
    """Manus as an A2A agent where the docs say ``http://localhost:10000``."""
    tmp = project.root.parent / "a2a"
    tmp.mkdir()
    server = project.background.enter_context(a2a_server(tmp, project.llm.base_url))
    project.substitutions["http://localhost:10000"] = server.url.rstrip("/")


def our_mcp_server(project: Project) -> None:
    """Our MCP server over streamable HTTP where the docs say ``http://127.0.0.1:8000/mcp``,
    its tools working in the project's workspace."""
    project.workspace.mkdir(exist_ok=True)
    args = ["-m", "app.mcp.server", "--transport", "http", "--port", "0"]
    args += ["--workspace", str(project.workspace)]
    _, url = project.background.enter_context(http_server(args, project.root.parent))
    project.substitutions["http://127.0.0.1:8000/mcp"] = url


def web_ui(project: Project) -> None:
    """The web UI where the docs say ``http://127.0.0.1:8765``, its token in the variable the
    docs name."""
    token = "doc-test-token-0123456789"
    app = WebApp(project.root.parent / "web", project.llm.base_url)
    app.env["OPENMANUS_WEB_TOKEN"] = token
    project.background.enter_context(running_web_ui(app))
    project.env["OPENMANUS_WEB_TOKEN"] = token
    project.substitutions["http://127.0.0.1:8765"] = app.base


@contextlib.contextmanager
def running_web_ui(app: WebApp) -> Iterator[WebApp]:
    app.start()
    try:
        yield app
    finally:
        app.stop()


def otlp_receiver(project: Project) -> None:
    """An OTLP receiver as the endpoint (``$OTEL_EXPORTER_OTLP_ENDPOINT``, documented)."""
    receiver = project.background.enter_context(OtlpReceiver())
    project.env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.url
    project.seen["otlp"] = receiver


def traced(project: Project, done: subprocess.CompletedProcess[str]) -> None:
    assert done.stdout == "notes.txt is the biggest.\n", done.stdout
    receiver = project.seen["otlp"]
    spans = receiver.wait_for(lambda spans: any(s.name == "invoke_agent Manus" for s in spans))
    assert any(s.name == "invoke_agent Manus" for s in spans), [s.name for s in spans]


# ---- more commands' scenarios --------------------------------------------------------------------


def flow_csv(project: Project) -> list[Any]:
    """run_flow.py: a one-step plan; Manus writes sales.csv; the summary is the answer."""
    create = {"command": "create", "path": "sales.csv", "file_text": "year,sales\n2020,10\n"}
    return [
        plan_call("[MANUS] Write sales.csv with the 2020-2024 figures"),
        tool_calls(call("str_replace_editor", create)),
        terminate("Wrote sales.csv"),
        text("sales.csv holds the 2020-2024 figures."),
    ]


def wrote_the_csv(project: Project, done: subprocess.CompletedProcess[str]) -> None:
    assert done.stdout.endswith("sales.csv holds the 2020-2024 figures.\n"), done.stdout
    assert (project.workspace / "sales.csv").read_text().startswith("year,sales")


def after_a_run(project: Project) -> None:
    """A finished session to list (when the page ran none before): the fizzbuzz task, run as
    getting-started shows."""
    if not project.sessions():
        command = f'python main.py -p "{TASK}"'
        mapping = COMMANDS[command]
        assert isinstance(mapping, Run)
        run_to_end(project, command, mapping)


def after_a_flow(project: Project) -> None:
    """A finished flow session, whose id stands for ``<id>``."""
    before = project.sessions()
    project.llm.push(*flow_csv(project))
    done = run_script(project, f'python run_flow.py -p "{TASK}"', None)
    assert done.returncode == 0, done.stderr
    [flow] = project.sessions() - before
    project.listed = [flow]


def resumed_flow(project: Project, done: subprocess.CompletedProcess[str]) -> None:
    assert f"Resumed session {project.listed[0]}" in done.stderr, done.stderr


def resumed_with_prompt(project: Project, done: subprocess.CompletedProcess[str]) -> None:
    assert done.stdout == "Added tests.\n"
    users = [m["content"] for m in project.llm.requests[-1].messages if m["role"] == "user"]
    assert users[0] == TASK and "now add tests" in users, users  # one conversation
    assert project.sessions() == set(project.listed)


def count_sessions(project: Project) -> None:
    project.seen["sessions"] = project.sessions()


def wrote_no_session(project: Project, done: subprocess.CompletedProcess[str]) -> None:
    assert done.stdout == ANSWER + "\n"
    assert project.sessions() == project.seen["sessions"]


RECORDED = "Charted sales.csv."


def recorded(project: Project, done: subprocess.CompletedProcess[str]) -> None:
    assert done.stdout == RECORDED + "\n"
    assert (project.root / "run.jsonl").read_text().strip()
    project.seen["requests"] = len(project.llm.requests)


def replayed(project: Project, done: subprocess.CompletedProcess[str]) -> None:
    assert done.stdout == RECORDED + "\n"
    assert len(project.llm.requests) == project.seen["requests"], "replay asked the model"


def write_tasks(project: Project) -> None:
    task = {"id": "q1", "prompt": "What is 6*7? Answer with the number only.", "expected": "42"}
    (project.root / "tasks.jsonl").write_text(json.dumps(task) + "\n")


def batch_results(project: Project, done: subprocess.CompletedProcess[str]) -> None:
    [result] = [
        json.loads(line) for line in (project.root / "results.jsonl").read_text().splitlines()
    ]
    assert result["id"] == "q1" and result["final_answer"] == "42" and result["correct"], result


def sessions_listed(project: Project, done: subprocess.CompletedProcess[str]) -> None:
    assert isinstance(json.loads(done.stdout), list | dict), done.stdout


def a2a_answered(project: Project, done: subprocess.CompletedProcess[str]) -> None:
    card, end = json.JSONDecoder().raw_decode(done.stdout)  # two bodies, one after the other
    assert card["name"] == "Manus Agent", card
    result = json.loads(done.stdout[end:])["result"]
    assert result["status"]["state"] == "completed", result
    assert result["artifacts"][-1]["parts"][0]["text"] == "42", result


def scripted_server_script(project: Project) -> None:
    """agents.md: "the script above saved as replies.json"; its fixed port made a free one."""
    [script] = [
        b.text
        for b in ALL_DOC_BLOCKS
        if b.page == "docs/agents.md" and b.language == "json" and '"type"' in b.text
    ]
    (project.root / "replies.json").write_text(script)
    project.substitutions["40123"] = str(free_port())


def drove_main_py(project: Project, done: subprocess.CompletedProcess[str]) -> None:
    assert "Done.\n" in done.stdout, done.stdout
    log = (project.root / "requests.jsonl").read_text().splitlines()
    assert len(log) == 3, log  # the python_execute call, the 429, its retry


def inspected(project: Project, done: subprocess.CompletedProcess[str]) -> None:
    assert done.stdout.count('"python_execute"') >= 2, done.stdout  # two tools/list
    assert "42" in done.stdout, done.stdout  # the tools/call


def workspace_example(project: Project) -> None:
    """The Inspector example's ``--workspace /tmp/ws``: a directory of the test's own."""
    (project.root / "ws").mkdir()
    project.substitutions["/tmp/ws"] = str(project.root / "ws")


def bedrock_script(project: Project) -> None:
    (project.root / "replies.json").write_text('["Hello from Bedrock"]')


def probe_bedrock(project: Project, url: str) -> None:
    status, _, _ = http_get(url.rstrip("/") + "/")
    assert status < 500, status


#: The set-up commands: the two scripts themselves, installs, the key's export.
SETUP = {
    "bash scripts/run.sh",
    "bash scripts/test.sh",
    "bash scripts/setup-npm-tools.sh",
    "export OPENAI_API_KEY=sk-...",
    ".venv/bin/pip install -e '.[docs]'",
    ".venv/bin/pip install -e '.[otel]'",
    ".venv/bin/pip install -e '.[anthropic]'",
    ".venv/bin/pip install -e '.[bedrock]'",
    "pip install -e '.[web]'",
    "pip install -e '.[a2a]'",
}

A2A_ADDRESS = re.compile(r"OpenManus A2A agent: (http://\S+/)")
WEB_ADDRESS = re.compile(r"OpenManus web UI: (http://127\.0\.0\.1:\d+/\?token=\S+)")
MCP_ADDRESS = re.compile(r"OpenManus MCP server listening on (http://\S+)")
HELLO_TASK = "Create hello.py and run it"

COMMANDS: dict[str, Mapping] = {
    "cp config/config.example.toml config/config.toml": Run(
        prepare=lambda project: project.config.unlink(), check=copied_the_example
    ),
    f'.venv/bin/python main.py -p "{TASK}" > answer.txt': Run(
        fizzbuzz, check=answered(file="answer.txt")
    ),
    '.venv/bin/python run_flow.py --data-analysis -p "Chart the numbers in sales.csv"': Run(
        chart_replies, prepare=write_sales, check=charted, needs=("matplotlib",)
    ),
    ".venv/bin/python -m app.mcp.server": StdioServer(probe_mcp_server),
    f'python run_mcp.py -p "{HELLO_TASK}"': Run(hello_over_mcp, check=said_hello),
    "python -m app.web": Serve(WEB_ADDRESS, probe_web_ui),
    "python -m protocol.a2a.app.main": Serve(A2A_ADDRESS, probe_a2a, append=("--port", "0")),
    ".venv/bin/python -m mkdocs build --strict": Run(check=built_the_site, needs=("mkdocs",)),
    f'bash scripts/run.sh -p "{TASK}"': Run(fizzbuzz, check=answered(), as_command=as_main_py),
    "python main.py": Run(fizzbuzz, stdin=f"{TASK}\nexit\n", check=answered()),
    f'python main.py -p "{TASK}"': Run(fizzbuzz, check=answered()),
    f'python main.py -p "{TASK}" -q > answer.txt': Run(
        fizzbuzz, check=answered(quiet=True, file="answer.txt")
    ),
    "python main.py --list-sessions": Run(check=lists_sessions(), prepare=after_a_run),
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
    # a2a.md
    "python -m protocol.a2a.app.main --host 127.0.0.1 --port 0 -w ~/agent-work --max-steps 30": (
        Serve(A2A_ADDRESS, probe_a2a)
    ),
    "curl http://localhost:10000/.well-known/agent-card.json": Script(
        lambda project: [terminate("42")], prepare=a2a_agent, check=a2a_answered
    ),
    # agents.md
    ".venv/bin/python -m app.testing.server --script replies.json --port 40123 --log "
    "requests.jsonl &": Script(prepare=scripted_server_script, check=drove_main_py),
    # batch.md
    "python -m app.batch tasks.jsonl -o results.jsonl -j 16 --rate-limit 300 --timeout 900": Run(
        lambda project: [text("42")], prepare=write_tasks, check=batch_results
    ),
    # bedrock.md
    "python -m app.testing.bedrock_server --script replies.json --port 8765 --log "
    "requests.jsonl": Serve(
        re.compile(r"(http://127\.0\.0\.1:\d+)"),
        probe_bedrock,
        prepare=bedrock_script,
        as_command=any_free_port,
    ),
    # flows.md
    'python run_flow.py -p "Make a CSV of the 2020-2024 sales figures and chart them"': Run(
        flow_csv, check=wrote_the_csv
    ),
    'python run_flow.py --data-analysis --timeout 600 -p "..."': Run(
        chart_replies,
        prepare=write_sales,
        check=charted,
        as_command=with_task("Chart the numbers in sales.csv"),
        needs=("matplotlib",),
    ),
    "python run_flow.py": Run(flow_csv, stdin=f"{TASK}\nexit\n", check=wrote_the_csv),
    # mcp.md
    "python run_mcp.py -i": Run(hello_over_mcp, stdin=f"{HELLO_TASK}\nexit\n", check=said_hello),
    'python run_mcp.py --connection http --server-url http://127.0.0.1:8000/mcp -p "..."': Run(
        hello_over_mcp, prepare=our_mcp_server, check=said_hello, as_command=with_task(HELLO_TASK)
    ),
    ".venv/bin/python -m app.mcp.server --transport http --port 8000": Serve(
        MCP_ADDRESS, probe_mcp_over("http"), stream="stderr", as_command=any_free_port
    ),
    ".venv/bin/python -m app.mcp.server --transport sse --port 8000": Serve(
        MCP_ADDRESS, probe_mcp_over("sse"), stream="stderr", as_command=any_free_port
    ),
    ".venv/bin/python -m app.mcp.server --transport http --port 8000 --run-task --config "
    "config/config.toml": Serve(
        MCP_ADDRESS,
        probe_mcp_over("http", run_task=True),
        stream="stderr",
        as_command=any_free_port,
    ),
    "bash scripts/setup-npm-tools.sh": Script(
        prepare=lambda project: (our_mcp_server(project), workspace_example(project))[0],
        check=inspected,
    ),
    # sessions-and-events.md
    "python main.py --resume 20260101-120000-a1b2c3": Run(
        lambda project: [text("Added tests.")],
        stdin="now add tests for it\n",
        check=resumed,
        as_command=with_listed_id,
    ),
    'python main.py --resume 20260101-120000-a1b2c3 -p "now add tests"': Run(
        lambda project: [text("Added tests.")],
        check=resumed_with_prompt,
        as_command=with_listed_id,
    ),
    "python run_flow.py --resume <id>": Run(
        check=resumed_flow, prepare=after_a_flow, as_command=with_listed_id
    ),
    'python main.py --no-session -p "..."': Run(
        fizzbuzz, prepare=count_sessions, check=wrote_no_session, as_command=with_task(TASK)
    ),
    'python main.py --record run.jsonl -p "Chart sales.csv"': Run(
        lambda project: [terminate(RECORDED)], check=recorded
    ),
    'python main.py --replay run.jsonl -p "Chart sales.csv"': Run(check=replayed),
    'python main.py --replay run.jsonl --strict-replay -p "..."': Run(
        check=replayed, as_command=with_task("Chart sales.csv")
    ),
    # tracing.md
    'python main.py --trace -p "What is the biggest file in the workspace?"': Run(
        lambda project: [terminate("notes.txt is the biggest.")],
        prepare=otlp_receiver,
        check=traced,
    ),
    # web-ui.md
    "python -m app.web --port 0 -w ~/agent-work --max-steps 30 --data-analysis": Serve(
        WEB_ADDRESS, probe_web_ui
    ),
    'curl -H "Authorization: Bearer $OPENMANUS_WEB_TOKEN" http://127.0.0.1:8765/api/sessions': Run(
        prepare=web_ui, check=sessions_listed
    ),
}
#: The commands by how their program sees them (``.venv/bin/python`` is ``python``).
MAPPED = {normalized(command): mapping for command, mapping in COMMANDS.items()}
SETUP_COMMANDS = {normalized(command) for command in SETUP}


def mapped(command: str) -> Mapping | None:
    return MAPPED.get(normalized(command))


# ---- running them ------------------------------------------------------------------------------


@pytest.fixture
def project(tmp_path: Path, llm_server: ScriptedLLMServer) -> Iterator[Project]:
    root = tmp_path / "checkout"
    (root / "config").mkdir(parents=True)
    shutil.copy(EXAMPLE, root / "config" / "config.example.toml")
    for name in ("main.py", "run_flow.py", "run_mcp.py", "mkdocs.yml", "docs"):
        (root / name).symlink_to(ROOT / name)
    (root / ".venv").symlink_to(VENV)
    (root / ".npm-tools").symlink_to(NPM_DIR)
    env = child_env(tmp_path)
    env.update(
        PATH=os.pathsep.join([str(VENV / "bin"), env.get("PATH", os.defpath)]),
        OPENAI_API_KEY=TEST_API_KEY,  # the pages' `export OPENAI_API_KEY=...`
        OPENMANUS_CONFIG=str(root / "config" / "config.toml"),
        OPENMANUS_WORKSPACE=str(root / "workspace"),  # (documented) not the checkout's
    )
    project = Project(root, llm_server, env)
    project.configure()
    with project.background:
        yield project


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


def substituted(project: Project, command: str) -> str:
    """``command`` with this run's addresses and paths in place of the documented ones."""
    for documented, actual in project.substitutions.items():
        command = command.replace(documented, actual)
    return command


def run_script(project: Project, command: str, stdin: str | None) -> Any:
    """``command`` (one command, or a whole block) to its end: the finished process."""
    proc = start(project, substituted(project, command), stdin=stdin is not None)
    try:
        out, err = proc.communicate(stdin, timeout=DEADLINE)
    finally:
        stop(proc)
    assert project.llm.remaining == 0, f"{command}: not every scripted reply was asked for"
    return subprocess.CompletedProcess(command, proc.returncode, out, err)


def run_to_end(project: Project, command: str, mapping: Run) -> None:
    for module in mapping.needs:
        pytest.importorskip(module)
    if mapping.prepare is not None:
        mapping.prepare(project)
    project.llm.push(*mapping.replies(project))
    if mapping.as_command is not None:
        command = mapping.as_command(project, command)
    done = run_script(project, command, mapping.stdin)
    assert done.returncode == mapping.code, f"{command}\n--- stderr ---\n{done.stderr}"
    if mapping.check is not None:
        mapping.check(project, done)


def run_block(project: Project, block: Block, mapping: Script) -> None:
    """A block mapped as a whole: its commands (not the set-up ones) as one script."""
    if mapping.prepare is not None:
        mapping.prepare(project)
    project.llm.push(*mapping.replies(project))
    kept = [c for c in block.commands if normalized(c) not in SETUP_COMMANDS]
    done = run_script(project, "set -e\n" + "\n".join(kept), None)
    assert done.returncode == 0, f"{block.id}\n--- stderr ---\n{done.stderr}"
    if mapping.check is not None:
        mapping.check(project, done)


def serve(project: Project, command: str, mapping: Serve) -> None:
    if mapping.prepare is not None:
        mapping.prepare(project)
    if mapping.as_command is not None:
        command = mapping.as_command(project, command)
    command = substituted(project, command)
    proc = start(project, " ".join(["exec", command, *mapping.append]))
    lines: queue.Queue[str | None] = queue.Queue()
    output: list[str | None] = []
    watched = proc.stdout if mapping.stream == "stdout" else proc.stderr
    other = proc.stderr if mapping.stream == "stdout" else proc.stdout

    def pump(stream: Any, into: Callable[[str | None], None]) -> None:
        for line in stream:
            output.append(line)
            into(line)
        into(None)

    threading.Thread(target=pump, args=(watched, lines.put), daemon=True).start()
    threading.Thread(target=pump, args=(other, lambda line: None), daemon=True).start()
    try:
        address = None
        while address is None:
            try:
                line = lines.get(timeout=DEADLINE)
            except queue.Empty:
                pytest.fail(f"{command}: printed no address in {DEADLINE:g} s: {output}")
            assert line is not None, f"{command} ended: {''.join(filter(None, output))}"
            if match := mapping.address.search(line):
                address = match.group(1)
        mapping.probe(project, address)
    finally:
        stop(proc)
    assert "Traceback" not in "".join(filter(None, output)), output


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


def block_params() -> list[Any]:
    """Every block with a command to run."""
    return [
        pytest.param(block, id=block.id)
        for block in ALL_BLOCKS
        if {normalized(c) for c in block.commands} - SETUP_COMMANDS
    ]


@pytest.mark.timeout(1200)  # a block runs several programs; each has its own deadline
@pytest.mark.parametrize("block", block_params())
def test_documented_commands_run(block: Block, project: Project) -> None:
    whole = mapped(block.commands[0])
    if isinstance(whole, Script):
        run_block(project, block, whole)
        return
    for command in block.commands:
        if normalized(command) in SETUP_COMMANDS:
            continue
        mapping = mapped(command)
        assert mapping is not None, f"{block.id}: no way to run {command!r} (add it to COMMANDS)"
        if isinstance(mapping, Run):
            run_to_end(project, command, mapping)
        elif isinstance(mapping, Serve):
            serve(project, command, mapping)
        elif isinstance(mapping, StdioServer):
            over_stdio(project, command, mapping)
        else:
            pytest.fail(f"{block.id}: {command!r} is a whole block's first command only")


# ---- the pages and the table agree -------------------------------------------------------------


def test_a_command_goes_on_over_lines() -> None:
    block = (
        "curl -d '{\n  \"a\": 1}'   # a body over two lines\n"
        "printf '%s\\n' \\\n    word > out.txt\n"
        "# a comment alone\n"
        "echo \"it's # not a comment\"  # it's one\n"
    )
    assert commands_of(block) == (
        "curl -d '{\n  \"a\": 1}'",
        "printf '%s\\n' word > out.txt",
        'echo "it\'s # not a comment"',
    )


def test_every_documented_command_is_mapped() -> None:
    """Every command of a page has its way
    to run; a block mapped whole needs only its first command mapped."""
    shown: set[str] = set()
    for block in ALL_BLOCKS:
        whole = isinstance(mapped(block.commands[0]), Script)
        shown |= {normalized(c) for c in (block.commands[:1] if whole else block.commands)}
    unmapped = sorted(shown - SETUP_COMMANDS - set(MAPPED))
    stale = sorted((set(MAPPED) | SETUP_COMMANDS) - shown)
    assert not unmapped, f"commands the pages show that no test runs: {unmapped}"
    assert not stale, f"COMMANDS or SETUP entries the pages no longer show: {stale}"
    assert len(MAPPED) == len(COMMANDS), "two COMMANDS entries are the same command"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(ROOT).as_posix())
def test_commands_are_shown_one_way(page: Path) -> None:
    """Commands are in ``bash`` blocks, without a ``$`` prompt, so the test above reads them
    all."""
    problems = []
    for start, language, lines in fenced_blocks(page):
        where = f"{page.name}:{start}"
        if language in SHELL_LANGUAGES - {"bash"}:  # (no language at all: test_doc_blocks)
            problems.append(f"{where}: a shell block is marked {language}")
        if language == "bash":
            problems += [f"{where}: {line!r}" for line in lines if line.startswith("$ ")]
    assert not problems, "commands go in ```bash blocks, without a prompt:\n" + "\n".join(problems)


@pytest.mark.parametrize("page", PROSE_PAGES, ids=lambda page: page.name)
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
    """The README's commands work after ``run.sh`` (plus the set-up commands the README shows
    next to them): every extra the mapped programs import is installed by one or the other."""
    run_sh = (ROOT / "scripts" / "run.sh").read_text(encoding="utf-8")
    [extras] = re.findall(r"^source scripts/setup-venv\.sh (\S+)$", run_sh, re.MULTILINE)
    installed = set(extras.split(","))
    readme = [c for block in ALL_BLOCKS if block.page == "README.md" for c in block.commands]
    for command in readme:
        if match := re.search(r"pip install -e '\.\[([\w,]+)\]'", command):
            installed |= set(match.group(1).split(","))
    needed = {"app.web": "web", "protocol.a2a": "a2a", "--data-analysis": "data", "mkdocs": "docs"}
    for command in readme:
        for word, extra in needed.items():
            if word in command:
                assert extra in installed, f"{command!r} needs the {extra} extra"
    assert {"browser", "search", "docker"} <= installed  # what Manus's own tools use
