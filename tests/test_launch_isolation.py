"""Every Python program this project starts on the host runs isolated: ``python -I`` (no
working directory, script directory, ``PYTHONPATH`` or user site on ``sys.path``) in a working
directory that cannot be a workspace, so nothing the model writes (``app/__init__.py``,
``sitecustomize.py``) is ever imported on the host (issue 34, item 1).

The check reads the source (AST) of everything we ship and finds each place that starts
``sys.executable`` or another Python, however the command is passed: an argv list anywhere,
``subprocess.*``, ``asyncio.create_subprocess_exec``, ``loop.subprocess_exec``, ``os.exec*`` /
``os.spawn*`` / ``os.posix_spawn*``, anyio's and trio's ``open_process``/``run_process``,
``pty``/``pexpect``, shell strings (and ``shlex.split``), ``multiprocessing``'s spawn and
process pools, a
``LaunchSpec``, the MCP SDK's ``StdioServerParameters``, ``command=`` with ``args=`` (and the
same keys in a dict: ``mcp.json`` style), and Ray's job settings (Ray runs its workers in, and
imports from, the driver's working directory unless the job has a ``working_dir``). The
checker's own tests feed it small sources, one per form, so a new launch written in any of
them fails. tests/test_sandbox_planted_code.py is the behavioural half.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.sandbox import hostside
from app.sandbox.launcher import LaunchOptions, launcher_argv
from tests.proc_utils import ROOT

#: What ships: the package, the A2A entry point, the scripts and the three programs.
SCANNED = ("app", "protocol", "scripts", "main.py", "run_flow.py", "run_mcp.py")

#: Functions that return an isolated command line (tested below on what they return).
ISOLATING_HELPERS = frozenset({"python_argv", "module_argv", "launcher_argv"})
#: Names of the working directory that is no workspace (``hostside.HOST_CWD``).
NEUTRAL_CWD_NAMES = frozenset({"HOST_CWD"})
#: The Sandbox API: an argv handed to it runs inside the sandbox (the model's own program).
SANDBOX_CALLS = frozenset({"command", "_run_once"})
#: Ray functions whose ``runtime_env`` decides where workers run and import from.
RAY_ENV_HELPER = "ray_runtime_env"

_SUBPROCESS = frozenset({"Popen", "run", "call", "check_call", "check_output"})
_SHELL_CALLS = frozenset(
    {
        "os.system",
        "os.popen",
        "asyncio.create_subprocess_shell",
        "subprocess.getoutput",
        "subprocess.getstatusoutput",
    }
)
#: anyio's and trio's process starters: the command line first (a list, or a shell string).
_ARGV_FIRST = frozenset({"open_process", "run_process"})
_PYTHON_NAME = re.compile(r"(^|/)python[0-9.]*$")
#: Identifiers that name an interpreter: ``python``, ``self.python``, ``llama_python()``,
#: ``python3``, ``venv_python_exe`` (not ``PythonExecute``, ``python_execute``, ``_PYTHON_TAG``).
_PYTHON_IDENTIFIER = re.compile(r"^_?([a-z0-9]+_)*python[0-9]*(_exe|_executable|_bin|_path)?$")
_PYTHON_WORD = re.compile(r"(^|[\s/'\"])python[0-9.]*(\s|$)")
_WRAPPERS = frozenset({"str", "fspath", "Path", "abspath", "realpath", "normpath", "PurePath"})


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    problem: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.problem}"


def _dotted(node: ast.AST) -> str:
    """``a.b.c`` for a name or attribute chain; a call in the chain leaves ``()``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Call):
        return f"{_dotted(node.func)}()"
    return "?"


def _last(node: ast.AST) -> str:
    return _dotted(node).rsplit(".", 1)[-1]


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _assignments(scope: ast.AST) -> dict[str, list[ast.expr]]:
    """Values assigned to each plain name in ``scope`` (``x = ...``, ``x += ...``, a tuple
    unpacking's starred target), not looking into nested functions or classes."""
    found: dict[str, list[ast.expr]] = {}

    def walk(node: ast.AST) -> Iterator[ast.AST]:
        for child in ast.iter_child_nodes(node):
            if isinstance(
                child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda
            ):
                continue
            yield child
            yield from walk(child)

    for node in walk(scope):
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    found.setdefault(target.id, []).append(node.value)
                elif isinstance(target, ast.Tuple | ast.List):
                    for element in target.elts:  # ``command, *args = module_argv(...)``
                        inner = element.value if isinstance(element, ast.Starred) else element
                        if isinstance(inner, ast.Name):
                            found.setdefault(inner.id, []).append(node.value)
        elif isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
            found.setdefault(node.target.id, []).append(node.value)
    return found


class _Checker(ast.NodeVisitor):
    def __init__(self, path: str, tree: ast.Module) -> None:
        self.path = path
        self.findings: list[Finding] = []
        self._scopes: list[dict[str, list[ast.expr]]] = [_assignments(tree)]
        self._sandboxed: set[int] = set()  # ids of argv displays handed to the Sandbox API
        self._subprocess_names: set[str] = set()  # ``from subprocess import Popen``

    # ---- reporting --------------------------------------------------------------------------

    def report(self, node: ast.AST, problem: str) -> None:
        finding = Finding(self.path, getattr(node, "lineno", 0), problem)
        if finding not in self.findings:
            self.findings.append(finding)

    # ---- names ------------------------------------------------------------------------------

    def resolve(self, name: str) -> list[ast.expr]:
        for scope in reversed(self._scopes):
            if name in scope:
                return scope[name]
        return []

    def is_python(self, node: ast.AST | None, depth: int = 0) -> bool:
        """Whether ``node`` names a Python interpreter (as the program of a command line)."""
        if node is None or depth > 8:
            return False
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return bool(_PYTHON_NAME.search(node.value.strip()))
        if isinstance(node, ast.Attribute):
            return _dotted(node) == "sys.executable" or bool(_PYTHON_IDENTIFIER.match(node.attr))
        if isinstance(node, ast.Name):
            if _PYTHON_IDENTIFIER.match(node.id):
                return True
            return any(self.is_python(v, depth + 1) for v in self.resolve(node.id))
        if isinstance(node, ast.BoolOp):
            return any(self.is_python(v, depth + 1) for v in node.values)
        if isinstance(node, ast.Call):
            name = _last(node.func)
            if name in _WRAPPERS and node.args:
                return self.is_python(node.args[0], depth + 1)
            if name == "which" and node.args:
                return self.is_python(node.args[0], depth + 1)
            return bool(_PYTHON_IDENTIFIER.match(name))
        return False

    # ---- command lines ----------------------------------------------------------------------

    @staticmethod
    def _flags_isolate(rest: list[ast.expr]) -> bool:
        """Whether the interpreter options before its program include ``-I``."""
        for element in rest:
            if isinstance(element, ast.Name | ast.Attribute) and _last(element) == "ISOLATED":
                return True  # ``hostside.ISOLATED``
            if not (isinstance(element, ast.Constant) and isinstance(element.value, str)):
                return False
            flag = element.value
            if not flag.startswith("-") or flag.startswith("--") or flag in ("-c", "-m", "-"):
                return False
            if "I" in flag[1:] and flag[1:].isalpha():
                return True
        return False

    def argv_status(self, node: ast.AST | None, depth: int = 0) -> str | None:
        """``isolated``, ``python`` (not isolated), ``delegated`` (a LaunchSpec's argv, checked
        where it is made) or None (no Python program, or nothing we can tell)."""
        if node is None or depth > 8:
            return None
        if isinstance(node, ast.List | ast.Tuple):
            if not node.elts:
                return None
            first = node.elts[0]
            if isinstance(first, ast.Starred):
                return self.argv_status(first.value, depth + 1)
            if self.is_python(first):
                return "isolated" if self._flags_isolate(node.elts[1:]) else "python"
            return None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self.argv_status(node.left, depth + 1)
        if isinstance(node, ast.Starred):
            return self.argv_status(node.value, depth + 1)
        if isinstance(node, ast.Name):
            statuses = {self.argv_status(v, depth + 1) for v in self.resolve(node.id)}
            for status in ("python", "isolated", "delegated"):
                if status in statuses:
                    return status
            return None
        if isinstance(node, ast.Attribute) and node.attr == "argv":
            return "delegated"
        if isinstance(node, ast.Call):
            name = _last(node.func)
            if name in ISOLATING_HELPERS:
                return "isolated"
            if name in ("list", "tuple") and node.args:
                return self.argv_status(node.args[0], depth + 1)
        return None

    def command_args_status(self, command: ast.AST | None, args: ast.AST | None) -> str | None:
        """The status of a program given apart from its arguments (``command=``/``args=``)."""
        if not self.is_python(command):
            return None
        if isinstance(args, ast.Name):
            values = self.resolve(args.id)
            if values and all(self._isolating_args(v) for v in values[:1]):
                return "isolated"
            return "python"
        return "isolated" if self._isolating_args(args) else "python"

    def _isolating_args(self, node: ast.AST | None) -> bool:
        if isinstance(node, ast.List | ast.Tuple):
            return self._flags_isolate(list(node.elts))
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self._isolating_args(node.left)
        if isinstance(node, ast.Call) and _last(node.func) == "isolate_args":
            return True
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Call):
            return _last(node.value.func) in ISOLATING_HELPERS  # ``module_argv(...)[1:]``
        return False

    def neutral_cwd(self, node: ast.AST | None, status: str | None) -> bool:
        if node is None:
            return False
        if isinstance(node, ast.Constant):
            return node.value == "/"
        if isinstance(node, ast.Name | ast.Attribute) and _last(node) in NEUTRAL_CWD_NAMES:
            return True
        return status == "delegated" and isinstance(node, ast.Attribute) and node.attr == "cwd"

    def check_launch(self, node: ast.Call, status: str | None, cwd: ast.AST | None) -> None:
        if status is None:
            return
        if status == "python":
            self.report(node, "starts Python without -I (it would import from its directory)")
        if status in ("python", "isolated") and not self.neutral_cwd(cwd, status):
            if cwd is None:
                self.report(node, "starts Python in the current directory (may be a workspace)")
            else:
                self.report(node, f"starts Python in cwd={ast.unparse(cwd)} (may be a workspace)")

    # ---- visiting ---------------------------------------------------------------------------

    def _visit_scope(self, node: ast.AST) -> None:
        self._scopes.append(_assignments(node))
        self.generic_visit(node)
        self._scopes.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._visit_scope(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._visit_scope(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module == "subprocess":
            self._subprocess_names.update(a.asname or a.name for a in node.names)
        if node.module == "multiprocessing":
            self.report(node, "multiprocessing may start Python by itself (spawn/forkserver)")

    def visit_List(self, node: ast.List) -> None:
        self._check_display(node)
        self.generic_visit(node)

    def visit_Tuple(self, node: ast.Tuple) -> None:
        self._check_display(node)
        self.generic_visit(node)

    def _check_display(self, node: ast.List | ast.Tuple) -> None:
        if id(node) not in self._sandboxed and self.argv_status(node) == "python":
            self.report(node, "a Python command line without -I")

    def visit_Dict(self, node: ast.Dict) -> None:
        keys = {
            k.value: v
            for k, v in zip(node.keys, node.values, strict=True)
            if isinstance(k, ast.Constant)
        }
        status = self.command_args_status(keys.get("command"), keys.get("args"))
        if "command" in keys and status == "python":
            self.report(node, "an MCP server entry starting Python without -I")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        dotted = _dotted(node.func)
        name = _last(node.func)
        keywords = {k.arg: k.value for k in node.keywords if k.arg is not None}
        if name in SANDBOX_CALLS:
            for arg in node.args[:1]:
                self._sandboxed.add(id(arg))
        if (dotted.startswith("subprocess.") and name in _SUBPROCESS) or (
            isinstance(node.func, ast.Name) and name in self._subprocess_names
        ):
            argv = node.args[0] if node.args else keywords.get("args")
            if self._is_text(argv):
                self._check_shell_text(node, argv)
            self.check_launch(node, self.argv_status(argv), keywords.get("cwd"))
        elif name in ("create_subprocess_exec", "subprocess_exec", "spawn", *_ARGV_FIRST) and (
            name != "spawn" or dotted.startswith(("pty.", "pexpect."))
        ):
            args = node.args[1:] if name == "subprocess_exec" else node.args
            if name in _ARGV_FIRST or dotted.startswith("pty."):
                argv = args[0] if args else keywords.get("command")
                if self._is_text(argv):
                    self._check_shell_text(node, argv)
                status = self.argv_status(argv)
            elif name == "spawn":  # pexpect.spawn(program or command line, args)
                program = args[0] if args else None
                if self._is_text(program):
                    self._check_shell_text(node, program)
                rest = args[1] if len(args) > 1 else keywords.get("args")
                status = self.command_args_status(program, rest)
            else:
                status = self.argv_status(ast.List(elts=list(args), ctx=ast.Load()))
            self.check_launch(node, status, keywords.get("cwd"))
        elif dotted in _SHELL_CALLS or name in ("create_subprocess_shell", "subprocess_shell"):
            command = node.args[1] if name == "subprocess_shell" and len(node.args) > 1 else None
            self._check_shell_text(node, command or (node.args[0] if node.args else None))
        elif dotted.startswith("os.") and re.fullmatch(r"exec[lv]p?e?|spawn[lv]p?e?", name):
            self._check_exec(node, name)
        elif dotted.startswith("os.") and name in ("posix_spawn", "posix_spawnp"):
            status = self.argv_status(node.args[1] if len(node.args) > 1 else None)
            if self.is_python(node.args[0] if node.args else None) and status is None:
                status = "python"
            self.check_launch(node, status, None)
        elif name == "ProcessPoolExecutor" or (dotted == "shlex.split" and node.args):
            if name == "ProcessPoolExecutor":
                self.report(node, "a process pool starts Python through multiprocessing")
            else:
                self._check_shell_text(node, node.args[0])
        elif "multiprocessing" in dotted and name in ("get_context", "set_start_method"):
            method = node.args[0] if node.args else None
            if isinstance(method, ast.Constant) and method.value in ("spawn", "forkserver"):
                self.report(node, f"multiprocessing's {method.value} starts Python by itself")
        elif name == "StdioServerParameters":
            status = self.command_args_status(keywords.get("command"), keywords.get("args"))
            self.check_launch(node, status, keywords.get("cwd"))
        elif name == "LaunchSpec":
            argv = keywords.get("argv", node.args[0] if node.args else None)
            cwd = keywords.get("cwd", node.args[2] if len(node.args) > 2 else None)
            self.check_launch(node, self.argv_status(argv), cwd)
        elif "command" in keywords and "args" in keywords:
            if self.command_args_status(keywords["command"], keywords["args"]) == "python":
                self.report(node, "starts Python (command=, args=) without -I")
        elif name == "connect_stdio" and len(node.args) >= 2:
            if self.command_args_status(node.args[0], node.args[1]) == "python":
                self.report(node, "starts Python (connect_stdio) without -I")
        self._check_ray(node, dotted, name, keywords)
        self.generic_visit(node)

    @staticmethod
    def _is_text(node: ast.AST | None) -> bool:
        return isinstance(node, ast.JoinedStr) or (
            isinstance(node, ast.Constant) and isinstance(node.value, str)
        )

    def _check_shell_text(self, node: ast.Call, command: ast.AST | None) -> None:
        text = ""
        if isinstance(command, ast.Constant) and isinstance(command.value, str):
            text = command.value
        elif isinstance(command, ast.JoinedStr):
            text = ast.unparse(command)
        if _PYTHON_WORD.search(text) or "sys.executable" in text:
            self.report(node, "starts Python from a shell command line (use an argv with -I)")

    def _check_exec(self, node: ast.Call, name: str) -> None:
        args = node.args[1:] if name.startswith("spawn") else node.args
        program = args[0] if args else None
        if "v" in name:
            status = self.argv_status(args[1] if len(args) > 1 else None)
        else:
            status = self.argv_status(ast.List(elts=list(args[1:]), ctx=ast.Load()))
        if status is None and self.is_python(program):
            status = "python"
        # exec keeps the process's working directory; spawn has no cwd: neither is neutral.
        self.check_launch(node, status, None)

    def _check_ray(self, node: ast.Call, dotted: str, name: str, keywords: dict) -> None:
        is_init = dotted in ("ray.init", "ray_module.init") or (
            name == "init" and dotted.split(".")[0] == "ray"
        )
        env: ast.AST | None = keywords.get("runtime_env")
        if is_init and env is None:
            for k in node.keywords:  # ``ray.init(**common)``
                if k.arg is None and isinstance(k.value, ast.Name):
                    for value in self.resolve(k.value.id):
                        if isinstance(value, ast.Dict):
                            for key, item in zip(value.keys, value.values, strict=True):
                                if isinstance(key, ast.Constant) and key.value == "runtime_env":
                                    env = item
        if not (is_init or (name in ("options", "remote") and "runtime_env" in keywords)):
            return
        values = self.resolve(env.id) if isinstance(env, ast.Name) else [env]
        if not all(isinstance(v, ast.Call) and _last(v.func) == RAY_ENV_HELPER for v in values):
            self.report(
                node,
                "Ray's workers would run in, and import from, the driver's working directory "
                f"(give runtime_env={RAY_ENV_HELPER}(...))",
            )


def check_source(source: str, path: str = "<source>") -> list[Finding]:
    """Every un-isolated start of a Python program in ``source``."""
    tree = ast.parse(source)
    checker = _Checker(path, tree)
    checker.visit(tree)
    return checker.findings


def shipped_files() -> list[Path]:
    files: list[Path] = []
    for name in SCANNED:
        path = ROOT / name
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return files


# ---- the project --------------------------------------------------------------------------------


def test_no_python_we_start_imports_from_a_directory_the_model_can_write() -> None:
    findings = []
    for path in shipped_files():
        findings += check_source(path.read_text(), str(path.relative_to(ROOT)))
    assert not findings, "\n".join(map(str, findings))


def test_the_scan_sees_every_kind_of_launch_we_ship() -> None:
    """The scan reads what we ship (a checker that reads nothing passes everything)."""
    names = {str(p.relative_to(ROOT)) for p in shipped_files()}
    for expected in (
        "app/sandbox/docker.py",
        "app/sandbox/local.py",
        "app/sandbox/launcher.py",
        "app/cli/session.py",
        "app/batch/ray_backend.py",
        "app/mcp/client.py",
        "main.py",
        "run_mcp.py",
        "protocol/a2a/app/main.py",
    ):
        assert expected in names


def test_the_isolating_helpers_isolate() -> None:
    """What the checker trusts by name, checked on what it returns."""
    for argv in (
        hostside.python_argv("-c", "pass"),
        hostside.module_argv("app.mcp.server", "--help"),
        launcher_argv(["true"], LaunchOptions()),
    ):
        assert argv[0] == hostside.python() and argv[1] == "-I", argv
    assert hostside.isolate_args(["-m", "app.mcp.server"])[:1] == ["-I"]
    assert hostside.isolate_args(["-I", "-m", "x"]) == ["-I", "-m", "x"]
    assert Path(hostside.HOST_CWD) == Path("/")
    env = hostside.ray_runtime_env({"env_vars": {"A": "1"}})
    assert env["env_vars"] == {"A": "1"} and Path(env["working_dir"]).is_dir()
    assert not any(Path(env["working_dir"]).iterdir())
    assert hostside.ray_runtime_env({"working_dir": "/srv/job"})["working_dir"] == "/srv/job"


def test_the_interpreter_path_has_no_dot_dot() -> None:
    python = hostside.python()
    assert ".." not in Path(python).parts and Path(python).is_absolute()
    assert Path(python).samefile(sys.executable)


# ---- the checker, on small sources --------------------------------------------------------------

UNISOLATED = {
    "argv list": "cmd = [sys.executable, '-m', 'app.x']",
    "argv list with a flag": "cmd = [sys.executable, '-u', 'x.py']",
    "-I after -c is the program's argument": "cmd = [sys.executable, '-c', code, '-I']",
    "python3 by name": "subprocess.run(['python3', 'x.py'], cwd='/')",
    "a name holding sys.executable": (
        "python = sys.executable\nsubprocess.run([python, 'x.py'], cwd='/')"
    ),
    "an interpreter of another venv": "args = [str(llama_python()), '-m', 'llama_cpp.server']",
    "a local alias": (
        "exe = sys.executable or 'python3'\nsubprocess.Popen([exe, '-m', 'x'], cwd='/')"
    ),
    "Popen without cwd": "subprocess.Popen([sys.executable, '-I', '-m', 'x'])",
    "Popen in the workspace": "subprocess.Popen([sys.executable, '-I', 'x.py'], cwd=workspace)",
    "from-imported Popen": "from subprocess import Popen\nPopen([sys.executable, '-I', 'x'])",
    "create_subprocess_exec": (
        "await asyncio.create_subprocess_exec(sys.executable, '-m', 'x', cwd='/')"
    ),
    "create_subprocess_exec, no cwd": (
        "await asyncio.create_subprocess_exec(sys.executable, '-I', '-m', 'x')"
    ),
    "create_subprocess_exec, starred": (
        "argv = [sys.executable, '-m', 'x']\nawait asyncio.create_subprocess_exec(*argv, cwd='/')"
    ),
    "loop.subprocess_exec": (
        "await loop.subprocess_exec(Proto, sys.executable, '-c', code, cwd='/')"
    ),
    "os.execv": "os.execv(sys.executable, [sys.executable, '-I', 'x.py'])",
    "os.execl": "os.execl(sys.executable, sys.executable, '-m', 'x')",
    "os.execvp by name": "os.execvp('python3', ['python3', '-I', 'x'])",
    "os.spawnv": "os.spawnv(os.P_WAIT, sys.executable, [sys.executable, 'x.py'])",
    "os.posix_spawn": "os.posix_spawn(sys.executable, [sys.executable, 'x.py'], env)",
    "os.system": "os.system('python3 -m app.x')",
    "os.system, f-string": "os.system(f'{sys.executable} -m app.x')",
    "shell=True": "subprocess.run('cd ws && python -m app.x', shell=True)",
    "create_subprocess_shell": "await asyncio.create_subprocess_shell('python3 x.py')",
    "pty.spawn": "pty.spawn([sys.executable, '-m', 'x'])",
    "pexpect.spawn": "child = pexpect.spawn(sys.executable, ['-m', 'x'])",
    "pexpect.spawn, a command line": "child = pexpect.spawn('python3 -m app.x')",
    "built up by append": "cmd = [sys.executable]\ncmd += ['-m', 'x']\nsubprocess.run(cmd)",
    "anyio.open_process": "await anyio.open_process([sys.executable, '-m', 'x'], cwd='/')",
    "anyio.run_process, a shell string": "await anyio.run_process('python3 -m app.x')",
    "trio.run_process": "await trio.run_process([sys.executable, '-I', 'x'])",
    "shlex.split": "argv = shlex.split(f'{sys.executable} -m app.x')",
    "a process pool": "pool = concurrent.futures.ProcessPoolExecutor(4)",
    "multiprocessing spawn": "ctx = multiprocessing.get_context('spawn')",
    "multiprocessing import": "from multiprocessing import Process",
    "StdioServerParameters": (
        "StdioServerParameters(command=sys.executable, args=['-m', 'app.mcp.server'], cwd='/')"
    ),
    "StdioServerParameters, no cwd": (
        "StdioServerParameters(command=sys.executable, args=['-I', '-m', 'app.mcp.server'])"
    ),
    "command= args=": (
        "await agent.initialize('stdio', command=sys.executable, args=['-m', 'app.mcp.server'])"
    ),
    "command= args= by name": (
        "args = ['-m', 'app.mcp.server']\nargs += ['--config', c]\n"
        "MCPServerConfig(type='stdio', command=sys.executable, args=args)"
    ),
    "connect_stdio": "await clients.connect_stdio(sys.executable, ['-m', 'app.mcp.server'])",
    "an mcp.json entry": (
        "servers = {'ours': {'command': 'python', 'args': ['-m', 'app.mcp.server']}}"
    ),
    "LaunchSpec": (
        "LaunchSpec(argv=[sys.executable, '-m', 'app.sandbox.docker_relay'], env=e, cwd='/')"
    ),
    "LaunchSpec in the workspace": (
        "LaunchSpec(argv=python_argv('relay.py'), env=e, cwd=str(self.workspace))"
    ),
    "ray.init": "ray.init(address='local')",
    "ray.init with a plain env": "ray.init(address='local', runtime_env={'env_vars': {}})",
    "ray.init(**common)": (
        "common = {'runtime_env': self.runtime_env}\nray.init(address=a, **common)"
    ),
    "an actor's runtime_env": "Worker.options(runtime_env={'env_vars': {}}).remote()",
}

ISOLATED = {
    "argv list": "subprocess.Popen([sys.executable, '-I', '-m', 'x'], cwd='/')",
    "combined flags": "subprocess.Popen([sys.executable, '-IS', 'x.py'], cwd=HOST_CWD)",
    "the helpers": "subprocess.Popen(python_argv('-S', path), cwd=hostside.HOST_CWD)",
    "a module": "await asyncio.create_subprocess_exec(*module_argv('x'), cwd=HOST_CWD)",
    "a LaunchSpec's argv": "await asyncio.create_subprocess_exec(*spec.argv, cwd=spec.cwd)",
    "a LaunchSpec": "LaunchSpec(argv=launcher_argv(argv, options), env=env, cwd=HOST_CWD)",
    "a relay": (
        "relay = python_argv(path, cid)\nreturn LaunchSpec(argv=relay, env=env, cwd=HOST_CWD)"
    ),
    "not Python": "subprocess.run(['bwrap', '--help'])\nsubprocess.run('ls -l', shell=True)",
    "the model's program, in the sandbox": "sandbox.command([sandbox.python, '-c', code])",
    "run_python": "await self._run_once([self.python, '-c', code], timeout)",
    "command= args= isolated": (
        "await agent.initialize('stdio', command=sys.executable, args=['-I', '-m', "
        "'app.mcp.server'])"
    ),
    "isolate_args": "MCPServerConfig(command=c.command, args=isolate_args(args))",
    "StdioServerParameters": (
        "StdioServerParameters(command=sys.executable, args=['-I', '-m', 'x'], cwd=HOST_CWD)"
    ),
    "someone else's server": (
        "StdioServerParameters(command=cfg.command, args=list(cfg.args), cwd=self.cwd)"
    ),
    "an mcp.json entry": "{'fs': {'command': 'npx', 'args': ['-y', 'server-filesystem']}}",
    "ray.init": "ray.init(address='local', runtime_env=ray_runtime_env(self.runtime_env))",
    "ray.init(**common)": (
        "common = {'runtime_env': ray_runtime_env(env)}\nray.init(address=a, **common)"
    ),
    "ray.init, by name": (
        "env = ray_runtime_env(e)\ncommon = {'runtime_env': env}\nray.init(**common)"
    ),
    "names that only contain 'python'": "tools = [PythonExecute(), python_execute, _PYTHON_TAG]",
    "multiprocessing's fork": "ctx = multiprocessing.get_context('fork')",
    "anyio, isolated": "await anyio.open_process([sys.executable, '-I', 'x.py'], cwd=HOST_CWD)",
    "shlex.split, not Python": "argv = shlex.split('ls -l /tmp')",
}


@pytest.mark.parametrize("form", sorted(UNISOLATED))
def test_the_checker_finds_an_unisolated_launch(form: str) -> None:
    findings = check_source(UNISOLATED[form])
    assert findings, f"{form}: not found in {UNISOLATED[form]!r}"


@pytest.mark.parametrize("form", sorted(ISOLATED))
def test_the_checker_accepts_an_isolated_launch(form: str) -> None:
    assert check_source(ISOLATED[form]) == [], form


def test_the_checker_names_the_line_and_the_problem() -> None:
    source = (
        "import subprocess, sys\n\n"
        "def start(ws):\n"
        "    subprocess.Popen([sys.executable, '-m', 'x'], cwd=ws)\n"
    )
    problems = {(f.line, f.problem) for f in check_source(source, "x.py")}
    assert (4, "starts Python without -I (it would import from its directory)") in problems
    assert (4, "starts Python in cwd=ws (may be a workspace)") in problems


# ---- how an installed package resolves under -I -------------------------------------------------


@pytest.mark.e2e
def test_an_isolated_interpreter_imports_the_installed_package_not_a_planted_one(
    tmp_path: Path,
) -> None:
    """Started in a directory holding ``app/`` and ``sitecustomize.py`` (and with both on
    ``PYTHONPATH``), ``python -I`` imports the real package (an editable install resolves
    through its finder, which a ``.pth`` file in site-packages installs; ``-I`` keeps those)."""
    marker = tmp_path / "MARKER"
    plant = f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\n"
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__init__.py").write_text(plant)
    (tmp_path / "sitecustomize.py").write_text(plant)
    (tmp_path / "usercustomize.py").write_text(plant)
    code = "import app, app.sandbox.hostside as h; print(app.__file__)"
    done = subprocess.run(
        hostside.python_argv("-c", code),
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert Path(done.stdout.strip()).resolve() == (ROOT / "app" / "__init__.py").resolve()
    assert not marker.exists(), marker.read_text()


@pytest.mark.e2e
def test_a_regular_install_resolves_the_same_way(tmp_path: Path) -> None:
    """Not editable: ``app`` copied into a venv's site-packages (what ``pip install .``
    leaves), the dependencies reached through a ``.pth`` path line (which, unlike a
    ``site-packages`` directory, installs no editable finder). Our stdio MCP server, started as
    ``-I -m app.mcp.server`` from a planted directory, is the installed copy."""
    import shutil
    import sysconfig

    venv = tmp_path / "venv"
    base = Path(sys.base_prefix) / "bin" / Path(sys.executable).name
    subprocess.run([str(base), "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    site = Path(sysconfig.get_path("purelib", vars={"base": str(venv)}))
    shutil.copytree(ROOT / "app", site / "app", ignore=shutil.ignore_patterns("__pycache__"))
    (site / "deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    planted = tmp_path / "start"
    (planted / "app" / "mcp").mkdir(parents=True)
    marker = tmp_path / "MARKER"
    for name in ("app/__init__.py", "app/mcp/__init__.py", "app/mcp/server.py", "sitecustomize.py"):
        (planted / name).write_text(f"open({str(marker)!r}, 'a').write(__file__ + '\\n')\n")
    python = str(venv / "bin" / "python")
    where = subprocess.run(
        [python, "-I", "-c", "import app.mcp.server as s; print(s.__file__)"],
        cwd=planted, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    assert Path(where.stdout.strip()).is_relative_to(site), where.stdout
    served = subprocess.run(
        [python, *hostside.module_argv("app.mcp.server", "--help")[1:]],
        cwd=planted, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert served.returncode == 0 and "--transport" in served.stdout, served.stderr
    assert not marker.exists(), marker.read_text()
