"""The content store's pack and fetch on a folder store: ignore rules, no re-upload, one copy per manifest."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from skyhop.storage.claim_check import fetch, pack
from skyhop.storage.content import FolderContentStore
from skyhop.storage.errors import ContentNotFoundError
from skyhop.storage.manifest import Entry


def _tree(root: Path) -> None:
    (root / "sub").mkdir(parents=True)
    (root / "a.py").write_text("same\n")
    (root / "sub" / "b.py").write_text("same\n")  # one blob for both
    (root / "tool.sh").write_text("#!/bin/sh\n")
    os.chmod(root / "tool.sh", 0o755)
    (root / ".gitignore").write_text("*.log\n")
    (root / "debug.log").write_text("left out\n")
    os.symlink("a.py", root / "link")


def test_a_tree_round_trips_with_its_ignore_rules_modes_links_and_mtimes(tmp_path: Path) -> None:
    _tree(tmp_path / "src")
    store = FolderContentStore(tmp_path / "store")
    ref, report = asyncio.run(pack(tmp_path / "src", store))
    assert (report.files, report.uploaded) == (4, 3)
    tree = fetch(ref, tmp_path / "cache")
    assert sorted(str(p.relative_to(tree)) for p in tree.rglob("*")) == [
        ".gitignore", "a.py", "link", "sub", "sub/b.py", "tool.sh",
    ]  # fmt: skip
    assert os.readlink(tree / "link") == "a.py"
    assert os.stat(tree / "tool.sh").st_mode & 0o777 == 0o755
    assert (
        os.stat(tree / "sub" / "b.py").st_mtime_ns == os.stat(tmp_path / "src" / "sub" / "b.py").st_mtime_ns
    )
    again, report = asyncio.run(pack(tmp_path / "src", store))
    assert again == ref and report.uploaded == 0


def test_a_killed_fetch_leaves_a_partial_that_the_next_fetch_replaces(tmp_path: Path) -> None:
    _tree(tmp_path / "src")
    ref, _ = asyncio.run(pack(tmp_path / "src", FolderContentStore(tmp_path / "store")))
    cache = tmp_path / "cache"
    (cache / f"{ref.manifest}.partial" / "tree").mkdir(parents=True)  # what a kill -9 left
    (cache / f"{ref.manifest}.partial" / "tree" / "half").write_text("x")
    tree = fetch(ref, cache)
    assert fetch(ref, cache) == tree
    assert sorted(p.name for p in cache.iterdir()) == [ref.manifest, f"{ref.manifest}.lock"]
    assert not (tree / "half").exists()


def test_a_manifest_from_another_store_is_named_as_missing(tmp_path: Path) -> None:
    _tree(tmp_path / "src")
    ref, _ = asyncio.run(pack(tmp_path / "src", FolderContentStore(tmp_path / "store")))
    other = ref.model_copy(update={"store": (tmp_path / "elsewhere").as_uri()})
    with pytest.raises(ContentNotFoundError, match="must use the same store"):
        fetch(other, tmp_path / "cache")


@pytest.mark.parametrize("path", ["../x", "/etc/passwd", "a/../../x", "a//b"])
def test_a_manifest_path_outside_its_tree_is_refused(path: str) -> None:
    with pytest.raises(ValidationError, match="must be relative"):
        Entry(path=path, kind="file")


def test_a_task_yaml_cannot_claim_packed_files(tmp_path: Path) -> None:
    from skyhop.spec import SpecError, task_from_dict

    with pytest.raises(SpecError, match="packed: is written by skyhop"):
        task_from_dict({"run": "true", "packed": {"workdir": None}}, tmp_path)


def test_a_store_url_skyhop_cannot_use_is_one_line_and_exit_2(tmp_path: Path) -> None:
    import subprocess

    from tests.helpers import SKYHOP_CLI

    env = {
        **os.environ,
        "SKYHOP_STORE_URL": "ftp://files.example.com/x",
        "SKYHOP_TEMPORAL_ADDRESS": "127.0.0.1:1",
    }
    result = subprocess.run(
        [SKYHOP_CLI, "launch", "-y", "-c", "t-store", "--workdir", str(tmp_path), "echo hi"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        "Error: store.url: content store 'ftp://files.example.com/x': use file:///absolute/folder or "
        "s3://bucket[/prefix]"
    ]
