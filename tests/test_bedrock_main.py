"""main.py with upstream's Bedrock block, as written, runs a Manus task to FINISHED against the
scripted Bedrock server (the endpoint from ``AWS_ENDPOINT_URL_BEDROCK_RUNTIME``, the keys
from the environment, every request's signature checked)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from app.testing import call, tool_calls
from app.testing.bedrock_server import ScriptedBedrockServer
from tests.test_llm_stack import UPSTREAM_BEDROCK
from tests.test_main_e2e import MAIN, child_env

pytestmark = pytest.mark.e2e


def test_main_runs_a_manus_task_on_bedrock(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    config = tmp_path / "config.toml"
    config.write_text(UPSTREAM_BEDROCK)
    script = [
        tool_calls(
            call(
                "str_replace_editor",
                {
                    "command": "create",
                    "path": "hello.py",
                    "file_text": "print('hi from Bedrock')\n",
                },
            )
        ),
        tool_calls(call("python_execute", {"code": "import runpy; runpy.run_path('hello.py')"})),
        tool_calls(
            call("terminate", {"status": "success"}), content="Done: it prints hi from Bedrock"
        ),
    ]
    with ScriptedBedrockServer(script) as server:
        env = {k: v for k, v in child_env(tmp_path).items() if not k.startswith("AWS_")}
        env.update(server.env())
        env.pop("AWS_REGION")  # the region comes from base_url's host
        env.update(AWS_EC2_METADATA_DISABLED="true", AWS_CONFIG_FILE=str(tmp_path / "none"))
        proc = subprocess.run(
            [
                sys.executable,
                str(MAIN),
                "-p",
                "make and run hello.py",
                "--config",
                str(config),
                "--workspace",
                str(workspace),
            ],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=120,
        )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "Done: it prints hi from Bedrock"
    assert (workspace / "hello.py").read_text() == "print('hi from Bedrock')\n"
    assert [(r.auth, r.rejected) for r in server.requests] == [("sigv4", None)] * 3
    # The model read the program's output, as a toolResult of its call.
    last = server.requests[2].messages[-1]["content"]
    results = [b["toolResult"] for b in last if "toolResult" in b]
    assert "hi from Bedrock" in results[-1]["content"][0]["text"]
    assert server.requests[0].inference == {"maxTokens": 8192, "temperature": 1.0}
    assert server.requests[0].headers["authorization"].split("/")[2] == "us-west-2"
