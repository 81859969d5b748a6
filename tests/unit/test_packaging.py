"""skyhop installs as one ``skyhop`` namespace, so it never shadows another project's ``cli`` or ``spec``."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TOPS = ["activities", "cli", "contract", "optimizer", "providers", "serve", "spec", "storage", "workflows"]


def test_pyproject_lists_every_package_under_the_namespace() -> None:
    listed = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    found = {
        "skyhop." + str(init.parent.relative_to(REPO)).replace("/", ".")
        for top in TOPS
        for init in (REPO / top).rglob("__init__.py")
    }
    assert set(listed) == found | {"skyhop"}


def test_no_module_is_imported_by_its_top_level_name() -> None:
    """Importing every skyhop module loads nothing named ``cli``, ``workflows``, ... at the top."""
    code = (
        "import importlib, pkgutil, sys\n"
        "import skyhop.worker\n"
        f"for top in {TOPS!r}:\n"
        "    package = importlib.import_module('skyhop.' + top)\n"
        "    for info in pkgutil.walk_packages(package.__path__, prefix=package.__name__ + '.'):\n"
        "        if not info.name.endswith('__main__'):\n"
        "            importlib.import_module(info.name)\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {[*TOPS, 'worker']!r}))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_the_wheel_holds_only_the_namespace(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(REPO)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("skyhop-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names if not name.startswith("skyhop-")}
    assert tops == {"skyhop"}
    expected = ["skyhop/worker.py", "skyhop/cli/app.py", "skyhop/contract/__init__.py"]
    expected.append("skyhop/providers/runtime/node_runner.py")  # copied onto every node
    assert set(expected) <= set(names)
