"""Workflow code reads no clock, randomness or I/O of its own: a replay on another worker, or after
a restart, must make the same decisions from the same history.

The worker runs workflows unsandboxed (``workflows.runner``), so nothing stops such a call at run
time; this reads every module of ``workflows`` for one. Time is ``workflow.now()``, timers are
``asyncio.sleep``/``workflow.sleep``, randomness ``workflow.random()``, ids ``workflow.uuid4()``, and
I/O belongs in an activity. The replay tests (``tests/cluster/test_replay.py``) run the recorded
histories in the SDK's full sandbox as well.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

_WORKFLOWS = Path(__file__).parents[2] / "workflows"

_FORBIDDEN_MODULES = frozenset(
    {
        "asyncssh", "boto3", "concurrent", "glob", "http", "io", "multiprocessing", "os", "pathlib",
        "random", "requests", "secrets", "shutil", "signal", "socket", "sqlite3", "subprocess",
        "tempfile", "threading", "time", "urllib", "uuid",
    }
)  # fmt: skip
"""Modules whose use in a workflow is a clock, randomness, I/O or a thread."""

_FORBIDDEN_BUILTINS = frozenset({"open", "print", "input", "breakpoint", "exec", "eval"})

_CLOCKS = frozenset({"now", "utcnow", "today"})
"""``datetime.now()`` and the like; ``workflow.now()`` is the workflow's clock."""


def nondeterministic_uses(source: str) -> list[str]:
    """``line: what`` for each forbidden import or call in a module's source."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [
                f"{node.lineno}: import {a.name}" for a in node.names if _root(a.name) in _FORBIDDEN_MODULES
            ]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            if _root(node.module) in _FORBIDDEN_MODULES:
                found.append(f"{node.lineno}: from {node.module} import ...")
        elif isinstance(node, ast.Call):
            called = node.func
            if isinstance(called, ast.Name) and called.id in _FORBIDDEN_BUILTINS:
                found.append(f"{node.lineno}: {called.id}()")
            elif (
                isinstance(called, ast.Attribute)
                and called.attr in _CLOCKS
                and not _is_workflow(called.value)
            ):
                found.append(f"{node.lineno}: {ast.unparse(called)}()")
    return found


def _root(module: str) -> str:
    return module.split(".")[0]


def _is_workflow(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "workflow"


@pytest.mark.parametrize("path", sorted(_WORKFLOWS.glob("*.py")), ids=lambda path: path.name)
def test_workflow_modules_read_no_clock_randomness_or_io(path: Path) -> None:
    assert nondeterministic_uses(path.read_text()) == []


def test_each_kind_of_use_is_found() -> None:
    source = """
import time
from uuid import uuid4
from datetime import datetime
from temporalio import workflow

def decide():
    open("/etc/hosts")
    workflow.now()
    return datetime.now(), time.time(), uuid4()
"""
    assert nondeterministic_uses(source) == [
        "2: import time",
        "3: from uuid import ...",
        "8: open()",
        "10: datetime.now()",
    ]


def test_every_workflow_module_is_read() -> None:
    names = {path.stem for path in _WORKFLOWS.glob("*.py")}
    assert {"managed_job", "managed_task", "watch_hub", "cluster", "launch", "service"} <= names
