"""A Temporal outage while the CLI waits on the server: stdout carries nothing of the SDK's log."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from skyhop.cli.sdk_logs import OUTAGE_NOTICE
from tests.conftest import REPO
from tests.helpers import DevServer, embedded_env

pytestmark = pytest.mark.e2e

# A CLI command's client, as cli.running.run_command sets it up, asking the server something across an outage.
CLIENT = """
import asyncio, os, sys
from skyhop.cli.sdk_logs import route_sdk_logs
from skyhop.cli.client import connect
from skyhop.cli.config import load_config

async def main():
    route_sdk_logs()
    client = await connect(load_config(), sys.argv[1])
    print("connected", flush=True)
    sys.stdin.readline()  # the server is down now
    try:
        await asyncio.wait_for(client.count_workflows(), 3)
    except TimeoutError:
        pass  # still retrying, as the SDK does for about 10 s
    except Exception:
        pass  # it gave up: either way, what matters is what reached stdout and stderr
    print("done", flush=True)

asyncio.run(main())
os._exit(0)
"""


def test_sdk_warnings_go_to_the_log_file_and_one_plain_line(tmp_path: Path) -> None:
    server = DevServer(tmp_path)
    server.start()
    env = embedded_env(tmp_path / "user")
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", CLIENT, server.address],
            env=env, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        assert proc.stdout is not None and proc.stdout.readline() == "connected\n"
    finally:
        server.stop()
    out, err = proc.communicate("go\n", timeout=60)
    assert out == "done\n"
    assert "\x1b[" not in out + err
    assert err.splitlines() == [f"{OUTAGE_NOTICE} (details: {env['SKYHOP_HOME']}/cli.log)"]
    assert "retried" in (Path(env["SKYHOP_HOME"]) / "cli.log").read_text()
