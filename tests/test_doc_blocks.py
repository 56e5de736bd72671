"""Every code block of README.md and docs/*.md that can run is run (the shell blocks by
``tests/test_doc_commands.py``; the convention: ``tests/doc_blocks.py`` and docs/testing.md).

- **Python**: each unit (a block and the blocks that continue it) runs in one interpreter
  shared by the module (``tests/doc_block_driver.py``), against this module's scripted model
  server: the unit's config file names it, and :data:`SCENARIOS` says what it answers (a unit
  without an entry must not ask the model at all) and what the output must show. Example paths
  (``/tmp/work``) become directories of the test's own; a unit that needs a server (A2A, an
  OTLP receiver, a web page) gets a real one, named in its scenario.
- **JavaScript**: run with Node and the pinned npm packages of ``.npm-tools/``, against the
  real server the scenario starts.
- **TOML**: loaded by our config loader (the sections the block has), which must accept it.
- **JSON**: parsed, then checked by what it is: an ``mcp.json`` by the config loader, a
  scripted-model script by ``load_script``, batch tasks by the batch task model, tool
  arguments by the tool.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import signal
import subprocess
import sys
import threading
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from app.batch.models import BatchTask
from app.config import load_config
from app.testing import Reply, ScriptedLLMServer, call, load_script, text, tool_calls
from app.tool.chart.tools import DataVisualization
from tests.a2a_support import a2a_server
from tests.doc_blocks import (
    ALL_BLOCKS,
    PAGES,
    ROOT,
    DocBlock,
    chains,
    convention_problems,
    page_blocks,
)
from tests.mcp_helpers import http_server
from tests.npm_tools import NPM_DIR, node_env, npm_bin
from tests.otlp_receiver import OtlpReceiver
from tests.test_main_e2e import child_env, write_config
from tests.web_fixtures import WebServer
from tests.web_ui_helpers import WebApp

DRIVER = Path(__file__).with_name("doc_block_driver.py")
DEADLINE = 150.0  # seconds for one unit (a loaded 2-core machine; most take well under 5)


# ---- what each unit needs ----------------------------------------------------------------------


@dataclass
class Context:
    """One unit's run: its directory, the model server, and what its services provide."""

    tmp: Path
    llm: ScriptedLLMServer
    env: dict[str, str] = field(default_factory=dict)
    substitutions: dict[str, str] = field(default_factory=dict)
    config: str = ""  # TOML appended to the unit's config file
    services: dict[str, Any] = field(default_factory=dict)

    @property
    def cwd(self) -> Path:
        return self.tmp / "cwd"

    @property
    def workspace(self) -> Path:
        """The config's ``workspace_root``."""
        return self.tmp / "workspace"

    def own(self, path: str) -> Path:
        """Where an example path (``/tmp/work``) is for this unit."""
        return self.tmp / path.lstrip("/")

    def requests(self) -> list[Any]:
        """What the model server received during this unit."""
        return self.llm.requests

    def tool_outputs(self) -> list[str]:
        """The tool results the model read, in the last request of this unit."""
        messages = self.requests()[-1].messages
        return [str(m["content"]) for m in messages if m["role"] == "tool"]


Service = Callable[[Context], contextlib.AbstractContextManager[None]]


@dataclass(frozen=True)
class Scenario:
    """How a unit runs: the model's ``replies``, the example ``paths`` made the test's own,
    ``services`` started around it, and what its output must show (``expect``, ``check``)."""

    replies: Callable[[Context], list[Reply]] | None = None
    expect: tuple[str, ...] = ()
    check: Callable[[Context, str], None] | None = None
    paths: tuple[str, ...] = ("/tmp/work",)
    services: tuple[Service, ...] = ()
    prepare: Callable[[Context], None] | None = None
    tier: str = "e2e"


# ---- the services some units need ------------------------------------------------------------


@contextlib.contextmanager
def a2a_agent(context: Context) -> Iterator[None]:
    """Manus as an A2A agent (``python -m protocol.a2a.app.main``) on the scripted model."""
    (context.tmp / "a2a").mkdir()
    with a2a_server(context.tmp / "a2a", context.llm.base_url) as server:
        context.env["A2A_URL"] = server.url
        context.substitutions["http://localhost:10000/"] = server.url
        yield


@contextlib.contextmanager
def web_ui(context: Context) -> Iterator[None]:
    """The web UI (``python -m app.web``) on the scripted model, with its token."""
    app = WebApp(context.tmp / "web", context.llm.base_url).start()
    try:
        context.env.update(OPENMANUS_URL=app.base, OPENMANUS_WEB_TOKEN=app.token or "")
        yield
    finally:
        app.stop()


@contextlib.contextmanager
def otlp_receiver(context: Context) -> Iterator[None]:
    """An OTLP/HTTP receiver as ``[tracing]``'s endpoint."""
    with OtlpReceiver() as receiver:
        context.services["otlp"] = receiver
        context.config += f'[tracing]\nendpoint = "{receiver.url}"\n'
        yield


@contextlib.contextmanager
def our_mcp_servers(context: Context) -> Iterator[None]:
    """Our MCP server over streamable HTTP and over SSE, at the documented addresses' place."""
    with contextlib.ExitStack() as stack:
        for transport, documented in (
            ("http", "http://127.0.0.1:8000/mcp"),
            ("sse", "http://127.0.0.1:8001/sse"),
        ):
            (context.tmp / transport).mkdir()
            args = ["-m", "app.mcp.server", "--transport", transport, "--port", "0", "-w", "."]
            _, url = stack.enter_context(http_server(args, context.tmp / transport))
            context.substitutions[documented] = url
        yield


SEARXNG_ANSWER = {
    "query": "python asyncio",
    "results": [
        {
            "url": "https://docs.python.org/3/library/asyncio.html",
            "title": "asyncio",
            "content": "Asynchronous I/O",
            "engine": "brave",
        },
    ],
}


@contextlib.contextmanager
def web_pages(context: Context) -> Iterator[None]:
    """A local web site in place of example.com, and a SearXNG instance as ``[search]``."""
    with WebServer() as site:
        page = site.html(
            "/",
            "<html><head><title>Example Domain</title></head><body>"
            "<h1>Example Domain</h1><a href='/more'>More</a></body></html>",
        )
        site.routes["/searx/search"] = (200, "application/json", json.dumps(SEARXNG_ANSWER))
        context.substitutions["https://example.com"] = page.rstrip("/")
        context.config += (
            f'[search]\nengine = "SearXNG"\nsearxng_url = "{site.url}/searx"\n'
            "fallback_engines = []\n"
        )
        yield


# ---- what the model answers in each unit, and what the unit must show ------------------------


def terminate(answer: str) -> Reply:
    return tool_calls(call("terminate", {"status": "success"}), content=answer)


def primes(context: Context) -> list[Reply]:
    code = "print([n for n in range(2, 30) if all(n % d for d in range(2, n))][:10])"
    return [
        tool_calls(call("python_execute", {"code": code})),
        terminate("The first 10 primes are 2, 3, 5, 7, 11, 13, 17, 19, 23 and 29."),
    ]


def ran_primes(context: Context, output: str) -> None:
    outputs = context.tool_outputs()
    assert any("[2, 3, 5, 7, 11, 13, 17, 19, 23, 29]" in o for o in outputs), outputs


def weather_and_note(context: Context) -> list[Reply]:
    return [
        tool_calls(
            call("get_weather", {"city": "Paris"}),
            call("take_note", {"text": "Paris: sunny"}),
        ),
        terminate("It is sunny in Paris; noted."),
    ]


def used_both_tools(context: Context, output: str) -> None:
    outputs = context.tool_outputs()
    assert "Sunny, 21 degrees C in Paris" in outputs[-2], outputs
    assert "1 note(s) kept" in outputs[-1], outputs


def two_runs(context: Context) -> list[Reply]:
    return [*primes(context), terminate("Now it prints 20.")]


def flow_replies(context: Context) -> list[Reply]:
    chart = {"chartTitle": "Sales by month", "csvFilePath": "data/sales.csv"}
    return [
        tool_calls(
            call(
                "planning",
                {
                    "command": "create",
                    "plan_id": "p",
                    "title": "Sales chart",
                    "steps": ["[DATA_ANALYSIS] Chart data/sales.csv"],
                },
            )
        ),
        tool_calls(call("data_visualization", {"charts": [chart], "output_type": "png"})),
        terminate("Chart saved as visualization/Sales_by_month.png"),
        text("The sales chart is in visualization/Sales_by_month.png."),
    ]


def write_sales(context: Context) -> None:
    (context.workspace / "data").mkdir(parents=True)
    (context.workspace / "data" / "sales.csv").write_text("month,sales\nJan,10\nFeb,14\n")


def charted(context: Context, output: str) -> None:
    assert (context.workspace / "visualization" / "Sales_by_month.png").is_file(), output


def write_tasks(context: Context) -> None:
    task = {"id": "q1", "prompt": "What is 6*7? Answer with the number only.", "expected": "42"}
    (context.cwd / "tasks.jsonl").write_text(json.dumps(task) + "\n")


def two_files(context: Context) -> None:
    for name in ("a.txt", "b.txt"):
        (context.own("/tmp/work") / name).write_text(name)


def listed_two_files(context: Context, output: str) -> None:
    assert "a.txt" in context.tool_outputs()[0] and "b.txt" in context.tool_outputs()[0]


def input_csv(context: Context) -> None:
    (context.own("/srv/data") / "input.csv").write_text("a,b\n1,2\n")


def copied_from_the_container(context: Context, output: str) -> None:
    assert (context.own("/tmp/a.txt")).read_text() == "hi"


def traced(context: Context, output: str) -> None:
    receiver = context.services["otlp"]
    spans = receiver.wait_for(lambda spans: any(s.name.startswith("invoke_agent") for s in spans))
    assert any(s.name.startswith("invoke_agent") for s in spans), [s.name for s in spans]


def printed_the_answer(context: Context, output: str) -> None:
    """The demo prints the run's answer (not the terminate tool's own output), and the model
    got the front-end tool's result and the context."""
    assert output == "Teal: calm and fresh, fit for a paint shop.\n", output
    sent = json.dumps(context.requests()[-1].messages)
    assert "teal" in sent and "ACME, a paint shop" in sent


def said(answer: str, output: str) -> None:
    assert output.splitlines()[-1:] == [answer], output


def a2a_answers(context: Context) -> list[Reply]:
    return [
        tool_calls(call("python_execute", {"code": "print(6 * 7)"})),
        terminate("42"),
        terminate("49"),
    ]


#: Scenarios by (page, a text only that unit has).
SCENARIOS: dict[tuple[str, str], Scenario] = {
    ("README.md", "Create primes.py printing"): Scenario(
        primes, expect=("The first 10 primes are", "completed"), check=ran_primes
    ),
    ("README.md", "def get_weather"): Scenario(
        weather_and_note, expect=("-> get_weather", "It is sunny in Paris"), check=used_both_tools
    ),
    ("docs/agents.md", "Now make it print 20"): Scenario(
        two_runs, expect=("The first 10 primes are", "FINISHED"), check=ran_primes
    ),
    ("docs/flows.md", "FlowFactory.create_flow"): Scenario(
        flow_replies,
        prepare=write_sales,
        expect=("step 0: completed", "The sales chart is in", "['completed']"),
        check=charted,
    ),
    ("docs/batch.md", "run_batch"): Scenario(
        lambda context: [text("42")], prepare=write_tasks, expect=("42",)
    ),
    ("docs/mcp.md", "MCPAgent()"): Scenario(
        lambda context: [
            tool_calls(call("mcp_openmanus_bash", {"command": "ls"})),
            tool_calls(call("mcp_openmanus_terminate", {"status": "success"}), content="2 files"),
            tool_calls(call("mcp_openmanus_terminate", {"status": "success"}), content="Two."),
        ],
        prepare=two_files,
        expect=("2 files", "Two."),
        check=listed_two_files,
    ),
    ("docs/mcp.md", "MCPClients("): Scenario(services=(our_mcp_servers,), expect=("hello",)),
    ("docs/sandbox.md", "LocalSandboxClient"): Scenario(
        paths=("/srv/data", "/tmp/a.txt"),
        prepare=input_csv,
        expect=("Python 3", "a,b"),
        check=copied_from_the_container,
    ),
    ("docs/sessions-and-events.md", "run_stream"): Scenario(
        lambda context: [*primes(context), terminate("Done.")],
        expect=("→ python_execute", "run_finished"),
    ),
    ("docs/sessions-and-events.md", "SessionStore.for_workspace"): Scenario(
        lambda context: [terminate("Done.")]
    ),
    ("docs/tools.md", "async def get_weather("): Scenario(
        expect=(
            "get_weather - Current weather for a city.",
            "'maximum': 7",
            "Sunny in Paris for 1 day(s)",
            "Invalid arguments for tool 'get_weather'",
            "- when: unknown argument",
        )
    ),
    ("docs/tools.md", "class Weather(BaseTool)"): Scenario(expect=("['city']", "Sunny in Oslo")),
    ("docs/tools.md", "AskHuman("): Scenario(check=lambda context, output: said("no", output)),
    ("docs/sandbox.md", "create_sandbox("): Scenario(expect=("3 42\n", "b'hi'")),
    ("docs/tools.md", "StrReplaceEditor("): Scenario(
        paths=("/srv/project", "/data/shared"), expect=("- write more tests",)
    ),
    ("docs/tools.md", "BrowserUseTool()"): Scenario(
        services=(web_pages,), expect=("Example Domain", "asyncio"), tier="browser"
    ),
    ("docs/tracing.md", "trace(agent)"): Scenario(
        lambda context: [terminate("README.md describes the project.")],
        services=(otlp_receiver,),
        check=traced,
    ),
    ("docs/web-ui.md", "agui-demo.mjs"): Scenario(
        lambda context: [
            tool_calls(call("pick_colour", {"choices": ["teal", "red"]}), content="Asking."),
            terminate("Teal: calm and fresh, fit for a paint shop."),
        ],
        services=(web_ui,),
        check=printed_the_answer,
    ),
    ("docs/a2a.md", "ClientFactory"): Scenario(
        lambda context: [terminate("42")], services=(a2a_agent,), expect=("Answer: 42",)
    ),
    ("docs/local-models.md", "LlamaServer("): Scenario(tier="real_model"),
    ("docs/a2a.md", "create_client"): Scenario(
        a2a_answers,
        services=(a2a_agent,),
        expect=("Answer: 42", "ended TASK_STATE_COMPLETED", "Answer: 49"),
    ),
}


def scenario_of(unit: tuple[DocBlock, ...]) -> tuple[tuple[str, str] | None, Scenario]:
    text = "".join(block.text for block in unit)
    for key, scenario in SCENARIOS.items():
        if key[0] == unit[0].page and key[1] in text:
            return key, scenario
    return None, Scenario()


def substituted(text: str, context: Context, paths: tuple[str, ...]) -> str:
    """``text`` with the example paths under the test's directory and the services'
    addresses in place of the documented ones."""
    for path in paths:
        own = context.own(path)
        text = re.sub(rf"(?<![\w/.]){re.escape(path)}(?![\w])", str(own), text)
    for documented, actual in context.substitutions.items():
        text = text.replace(documented, actual)
    return text


def marks(unit: tuple[DocBlock, ...], tier: str) -> list[pytest.MarkDecorator]:
    return [getattr(pytest.mark, tier)]


def params(language: str) -> list[Any]:
    return [
        pytest.param(unit, id=unit[0].id, marks=marks(unit, scenario_of(unit)[1].tier))
        for unit in chains(language)
    ]


# ---- the Python driver -------------------------------------------------------------------------


class Driver:
    """The interpreter the Python units run in (restarted after a unit that hangs)."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> subprocess.Popen[str]:
        if self.proc is None or self.proc.poll() is not None:
            env = child_env(self.tmp)
            env.update(
                PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
                OPENMANUS_CACHE_DIR=str(self.tmp / "cache"),
            )
            self.proc = subprocess.Popen(
                [sys.executable, str(DRIVER)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=(self.tmp / "driver.log").open("a"),
                text=True,
                env=env,
                cwd=self.tmp,
                start_new_session=True,
            )
        return self.proc

    def run(self, unit: dict[str, Any], deadline: float = DEADLINE) -> dict[str, Any]:
        proc = self.start()
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(unit) + "\n")
        proc.stdin.flush()
        line: list[str] = []
        reader = _Reader(proc.stdout, line)
        reader.start()
        reader.join(deadline)
        if not line:
            self.stop()
            return {"error": f"did not finish within {deadline:g} s (the driver was restarted)"}
        outcome: dict[str, Any] = json.loads(line[0])
        return outcome

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


class _Reader(threading.Thread):
    """Reads one line, so that the caller can wait for it with a deadline."""

    def __init__(self, stream: Any, into: list[str]) -> None:
        super().__init__(daemon=True)
        self.stream, self.into = stream, into

    def run(self) -> None:
        line = self.stream.readline()
        if line:
            self.into.append(line)


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Driver]:
    running = Driver(tmp_path_factory.mktemp("doc-driver"))
    yield running
    running.stop()


def unit_config(context: Context) -> Path:
    """The unit's config: the scripted model, a workspace of its own, the scenario's extra."""
    workspace = context.tmp / "workspace"
    workspace.mkdir(exist_ok=True)
    model = write_config(context.tmp, context.llm.base_url).read_text()
    path = context.tmp / "config.toml"
    # workspace_root is a top-level key: before the first table.
    path.write_text(f'workspace_root = "{workspace}"\n{model}\n{context.config}\n')
    return path


@contextlib.contextmanager
def staged(scenario: Scenario, context: Context) -> Iterator[None]:
    """The unit's stage while it runs: its example paths made, its services up, its files
    prepared and the model's replies scripted."""
    context.cwd.mkdir()
    for path in scenario.paths:  # example paths, made the test's own (see ``substituted``)
        own = context.own(path)
        (own.parent if own.suffix else own).mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        for service in scenario.services:
            stack.enter_context(service(context))
        if scenario.prepare is not None:
            scenario.prepare(context)
        context.llm.push(*(scenario.replies(context) if scenario.replies else []))
        yield


def verify(scenario: Scenario, context: Context, output: str) -> None:
    """What every unit must show: the model asked exactly as scripted, the expected output."""
    if scenario.replies is None:
        asked = len(context.requests())
        assert asked == 0, f"the unit asked the model {asked} time(s): give it a scenario"
    left = context.llm.remaining
    assert left == 0, f"{left} scripted replies were not asked for:\n{output}"
    for expected in scenario.expect:
        assert expected in output, f"{expected!r} is not in the output:\n{output}"
    if scenario.check is not None:
        scenario.check(context, output)


@pytest.mark.parametrize("unit", params("python"))
def test_python_block(
    unit: tuple[DocBlock, ...], driver: Driver, llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    # A model server per unit: a reply a failed unit left is never another's.
    _, scenario = scenario_of(unit)
    context = Context(tmp_path, llm_server)
    output_file = tmp_path / "output.txt"
    with staged(scenario, context):
        blocks = [
            {
                "page": block.page,
                "line": block.line,
                "code": substituted(block.text, context, scenario.paths),
            }
            for block in unit
        ]
        outcome = driver.run(
            {
                "blocks": blocks,
                "cwd": str(context.cwd),
                "config": str(unit_config(context)),
                "env": context.env,
                "output": str(output_file),
            }
        )
        output = output_file.read_text() if output_file.exists() else ""
        assert outcome["error"] is None, f"{outcome['error']}\n--- output ---\n{output}"
        verify(scenario, context, output)


# ---- JavaScript ---------------------------------------------------------------------------------


@pytest.mark.parametrize("unit", params("javascript"))
def test_javascript_block(
    unit: tuple[DocBlock, ...], llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    """The block as a Node module (named as its first line says, ``// agui-demo.mjs``), with
    the pinned npm packages of ``.npm-tools/`` as its ``node_modules``."""
    npm_bin("esbuild")  # fails, naming scripts/setup-npm-tools.sh, when the tools are missing
    _, scenario = scenario_of(unit)
    context = Context(tmp_path, llm_server)
    with staged(scenario, context):
        source = "".join(substituted(b.text, context, scenario.paths) for b in unit)
        named = re.match(r"// ([\w.-]+\.mjs)\n", source)
        script = context.cwd / (named.group(1) if named else "block.mjs")
        script.write_text(source)
        (context.cwd / "node_modules").symlink_to(NPM_DIR / "node_modules")
        done = subprocess.run(
            ["node", script.name],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=DEADLINE,
            cwd=context.cwd,
            env=node_env(**context.env),
        )
        assert done.returncode == 0, done.stderr
        verify(scenario, context, done.stdout)


# ---- TOML and JSON -----------------------------------------------------------------------------


def blocks_of(language: str) -> list[Any]:
    return [
        pytest.param(block, id=block.id, marks=marks((block,), "unit")[1:])
        for block in ALL_BLOCKS
        if block.language == language and block.runs
    ]


def set_variables(block: DocBlock, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ``${VAR}`` (without a default) that ``block`` reads, set as a user would."""
    for name in re.findall(r"\$\{(\w+)\}", block.text):
        monkeypatch.setenv(name, f"value-of-{name}")


@pytest.mark.parametrize("block", blocks_of("toml"))
def test_toml_block(block: DocBlock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The block is a valid config (or part of one): our loader accepts its sections."""
    document = tomllib.loads(block.text)
    set_variables(block, monkeypatch)
    path = tmp_path / "config.toml"
    path.write_text(block.text)
    loaded = load_config(path, sections=frozenset(document))
    assert loaded.config_path == path


def _json_documents(block: DocBlock) -> list[Any]:
    try:
        return [json.loads(block.text)]
    except json.JSONDecodeError:  # JSON Lines: one object per line
        return [json.loads(line) for line in block.text.splitlines() if line.strip()]


@pytest.mark.parametrize("block", blocks_of("json"))
def test_json_block(block: DocBlock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    documents = _json_documents(block)
    set_variables(block, monkeypatch)
    first = documents[0]
    if isinstance(first, dict) and "mcpServers" in first:
        (tmp_path / "config.toml").write_text("")
        (tmp_path / "mcp.json").write_text(block.text)
        servers = load_config(tmp_path / "config.toml", sections=frozenset({"mcp"}))
        assert set(servers.mcp_config.servers) == set(first["mcpServers"])
    elif isinstance(first, list) or (isinstance(first, dict) and "replies" in first):
        assert load_script(io.StringIO(block.text))
    elif all(isinstance(d, dict) and "prompt" in d for d in documents):
        for document in documents:
            BatchTask.model_validate(document)
    elif isinstance(first, dict) and "charts" in first:
        DataVisualization().validate_arguments(first)
    else:
        pytest.fail(f"{block.id}: no check knows this JSON block; add one to test_json_block")


# ---- the convention ----------------------------------------------------------------------------


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_block_is_run_or_marked(page: Path) -> None:
    name = page.relative_to(ROOT).as_posix()
    problems = convention_problems([b for b in ALL_BLOCKS if b.page == name])
    assert not problems, "\n".join(problems)


def test_the_convention_check_finds_each_kind_of_mistake(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    fence = "```"
    page.write_text(
        f"{fence}\nno language\n{fence}\n\n"
        f"<!-- doc: continues -->\n{fence}python\nfirst = 1\n{fence}\n\n"
        f"<!-- doc: not run -->\n{fence}python\nx = 1\n{fence}\n\n"
        f"<!-- doc: skip -->\n{fence}python\ny = 2\n{fence}\n\n"
        f"<!-- doc: not run: a fragment -->\n{fence}yaml\nkey: value\n{fence}\n\n"
        f"{fence}python\nz = 3\n{fence}\n<!-- doc: continues -->\n{fence}python\nz += 1\n{fence}\n"
    )
    blocks = page_blocks(page, "page.md")
    assert [(b.line, b.marker) for b in blocks] == [
        (1, ""),
        (6, "continues"),
        (11, "not run"),  # not run, and a problem: no reason
        (16, ""),  # a marker with a mistake is no marker
        (21, "not run"),
        (25, ""),
        (29, "continues"),
    ]
    assert convention_problems(blocks) == [
        "page.md:1: a block names its language (bash, javascript, json, markdown, python, "
        "text, toml), or is marked <!-- doc: not run: why -->; this one says nothing",
        "page.md:6: `doc: continues` follows no python block",
        "page.md:11: `doc: not run` needs a reason: <!-- doc: not run: why -->",
        "page.md:16: unknown marker '<!-- doc: skip -->'",
    ]
    assert [[b.line for b in unit] for unit in chains("python", blocks)] == [[6], [16], [25, 29]]


def test_every_scenario_names_one_unit() -> None:
    units = chains("python") + chains("javascript")
    for key in SCENARIOS:
        matching = [
            u for u in units if u[0].page == key[0] and key[1] in "".join(b.text for b in u)
        ]
        assert len(matching) == 1, f"scenario {key} matches {len(matching)} units"
