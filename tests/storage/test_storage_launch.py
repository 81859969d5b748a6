"""Storage entries of ``file_mounts`` through the CLI on ``local``, with the buckets on moto's S3.

One launch carries every mode (the worker and the embedded moto are shared, so a launch is the
costly part): a named bucket filled from a local folder and copied (COPY), a bucket mounted
read/write (MOUNT), a write-back cached mount (MOUNT_CACHED), a user's existing bucket mounted and
one of its files copied by URL. ``down`` then deletes only the buckets skyhop created.
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest

from skyhop.providers.home import skyhop_home
from skyhop.providers.runtime.mounts import mounts_under
from tests.conftest import run, skyhop
from tests.helpers import DevServer, WorkerProcess, wait_for
from tests.integration.support import client_for, launch_submitted, plaintext_history, unique_cluster

pytestmark = pytest.mark.integration


def _keys(s3: Any, bucket: str) -> dict[str, bytes]:
    objects = s3.list_objects_v2(Bucket=bucket).get("Contents", [])
    return {o["Key"]: s3.get_object(Bucket=bucket, Key=o["Key"])["Body"].read() for o in objects}


def _buckets(s3: Any) -> set[str]:
    return {b["Name"] for b in s3.list_buckets()["Buckets"]}


async def _histories(address: str, cluster: str) -> bytes:
    """Every event of every workflow of the cluster (launches, the cluster itself), as stored and
    with its payloads decrypted."""
    client = await client_for(address)
    events = b""
    async for execution in client.list_workflows(f"SkyhopCluster = '{cluster}'"):
        events += await plaintext_history(client, execution.id, execution.run_id)
    return events


def _names() -> dict[str, str]:
    tag = uuid.uuid4().hex[:8]
    return {role: f"skyhop-test-{role}-{tag}" for role in ("copy", "mount", "cached", "user", "keep")}


def test_every_mode_through_a_launch_and_down_deletes_only_what_skyhop_created(
    live_worker: WorkerProcess, temporal_server: DevServer, cli_env: dict[str, str], s3: Any, tmp_path: Path
) -> None:
    cluster = unique_cluster()
    names = _names()
    s3.create_bucket(Bucket=names["user"])
    s3.put_object(Bucket=names["user"], Key="hello.txt", Body=b"from the user's bucket")
    (tmp_path / "data" / "sub").mkdir(parents=True)
    (tmp_path / "data" / "a.txt").write_text("local a")
    (tmp_path / "data" / "sub" / "b.txt").write_text("local b")
    (tmp_path / "task.yaml").write_text(
        "resources: {infra: local}\n"
        "file_mounts:\n"
        f"  ~/copied: {{name: {names['copy']}, source: ./data, mode: COPY, persistent: false}}\n"
        f"  ~/mnt: {{name: {names['mount']}, mode: MOUNT, persistent: false}}\n"
        f"  ~/ckpt: {{name: {names['cached']}, mode: MOUNT_CACHED, persistent: false}}\n"
        f"  ~/keep: {{name: {names['keep']}, mode: MOUNT}}\n"
        f"  ~/user: {{source: s3://{names['user']}, mode: MOUNT}}\n"
        f"  ~/hello.txt: s3://{names['user']}/hello.txt\n"
        "run: |\n"
        "  cat ~/copied/a.txt ~/copied/sub/b.txt; echo\n"
        "  cat ~/user/hello.txt; echo\n"
        "  cat ~/hello.txt; echo\n"
        "  echo written-by-the-job > ~/mnt/out.txt\n"
        "  head -c 3000000 /dev/urandom > ~/ckpt/model.ckpt\n"
        "  sha256sum ~/ckpt/model.ckpt | cut -c1-64 > ~/ckpt-digest\n"
    )
    home = skyhop_home() / "clusters" / cluster
    try:
        result = skyhop("launch", "-y", "-c", cluster, "task.yaml", env=cli_env, cwd=tmp_path, timeout=300)
        assert result.returncode == 0, result.stderr[-3000:]
        # The checkpoint is in its bucket by the time the job is reported done: no waiting here.
        ckpt = _keys(s3, names["cached"])
        assert list(ckpt) == ["model.ckpt"]
        assert len(ckpt["model.ckpt"]) == 3_000_000
        assert "local a" in result.stdout and "local b" in result.stdout
        assert result.stdout.count("from the user's bucket") == 2
        # The local source was uploaded to its bucket, and copied from there to the node.
        assert _keys(s3, names["copy"]) == {"a.txt": b"local a", "sub/b.txt": b"local b"}
        wait_for(lambda: "out.txt" in _keys(s3, names["mount"]), what="the job's file in the MOUNT bucket")
        assert _keys(s3, names["mount"])["out.txt"] == b"written-by-the-job\n"
        listed = json.loads(skyhop("storage", "ls", "--json", env=cli_env).stdout)["items"]
        mine = {item["name"]: item for item in listed}
        assert set(mine) == {names[r] for r in ("copy", "mount", "cached", "keep")}
        assert mine[names["keep"]]["persistent"] is True and mine[names["copy"]]["cluster"] == cluster
        assert len(mounts_under(home)) == 4
        # An exec'd job's writes to the cached mount are in the bucket once it is reported done,
        # though its own task names no storage: the cluster's launch mounted it.
        write = "for i in 1 2 3 4 5 6; do head -c 2000000 /dev/urandom > ~/ckpt/exec-$i.ckpt; done"
        ran = skyhop("exec", cluster, write, env=cli_env, timeout=300)
        assert ran.returncode == 0, ran.stderr[-2000:]
        ckpt = _keys(s3, names["cached"])
        assert sorted(ckpt) == [*(f"exec-{i}.ckpt" for i in range(1, 7)), "model.ckpt"]
        assert all(len(ckpt[f"exec-{i}.ckpt"]) == 2_000_000 for i in range(1, 7))
    finally:
        down = skyhop("down", "-y", cluster, env=cli_env, timeout=300)
    assert down.returncode == 0, down.stderr[-2000:]
    # Created and not persistent: gone. The user's bucket and the persistent one: kept, unchanged.
    assert _buckets(s3) == {names["user"], names["keep"]}
    assert list(_keys(s3, names["user"])) == ["hello.txt"]
    assert mounts_under(home.parent) == [] and not home.exists()
    # The nodes got the store's credentials in their job's environment; history holds none of it.
    history = run(_histories(temporal_server.address, cluster))
    assert names["cached"].encode() in history  # the plan is there (this reads the right events)
    assert b"RCLONE_CONFIG" not in history and b"secret_access_key" not in history.lower()

    deleted = skyhop("storage", "delete", "-y", names["keep"], names["user"], "no-such-bucket-x", env=cli_env)
    assert deleted.returncode == 1
    lines = deleted.stderr.strip().splitlines()
    assert f"Deleted s3://{names['keep']}" in lines
    assert any(line.startswith(f"{names['user']}: a s3 bucket skyhop did not create") for line in lines)
    assert "no-such-bucket-x: no such bucket (nothing deleted)" in lines
    assert _buckets(s3) == {names["user"]}


def test_a_local_source_reaches_its_bucket_from_the_content_store_not_the_clis_disk(
    live_worker: WorkerProcess, cli_env: dict[str, str], s3: Any, tmp_path: Path
) -> None:
    cluster, bucket = unique_cluster(), _names()["copy"]
    (tmp_path / "data" / "sub").mkdir(parents=True)
    (tmp_path / "data" / "a.txt").write_text("packed a")
    (tmp_path / "data" / "sub" / "b.txt").write_text("packed b")
    (tmp_path / "task.yaml").write_text(
        "resources: {infra: local}\n"
        f"file_mounts: {{~/copied: {{name: {bucket}, source: ./data, mode: COPY, persistent: false}}}}\n"
        "run: cat ~/copied/a.txt ~/copied/sub/b.txt\n"
    )
    try:
        live_worker.freeze()
        cli = launch_submitted(["-y", "-c", cluster, "task.yaml"], cli_env, tmp_path)
        shutil.rmtree(tmp_path / "data")  # the worker may be on another machine: only the store has it
        live_worker.thaw()
        out, err = cli.communicate(timeout=300)
        assert cli.returncode == 0, err[-3000:]
        assert out == "packed apacked b"
        assert _keys(s3, bucket) == {"a.txt": b"packed a", "sub/b.txt": b"packed b"}
    finally:
        live_worker.thaw()
        down = skyhop("down", "-y", cluster, env=cli_env, timeout=300)
    assert down.returncode == 0, down.stderr[-2000:]


def test_down_deletes_every_launch_s_buckets_but_not_a_persistent_one_nor_re_creates_a_deleted_one(
    live_worker: WorkerProcess, cli_env: dict[str, str], s3: Any, tmp_path: Path
) -> None:
    cluster = unique_cluster()
    names = _names()
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "x").write_text("x")
    (tmp_path / "extra.txt").write_text("extra")
    source = "[./data, ./extra.txt]"  # a list: each path lands under its own name
    (tmp_path / "first.yaml").write_text(
        "resources: {infra: local}\n"
        "file_mounts:\n"
        f"  ~/d: {{name: {names['copy']}, source: {source}, mode: COPY, persistent: false}}\n"
        f"  ~/m: {{name: {names['mount']}, persistent: false}}\n"
        "run: cat ~/d/data/x ~/d/extra.txt\n"
    )
    (tmp_path / "second.yaml").write_text(
        "resources: {infra: local}\n"
        f"file_mounts: {{~/c: {{name: {names['cached']}, mode: MOUNT_CACHED, persistent: false}},"
        f" ~/k: {{name: {names['keep']}}}}}\n"
        "run: 'true'\n"
    )
    try:
        result = skyhop("launch", "-y", "-c", cluster, "first.yaml", env=cli_env, cwd=tmp_path, timeout=300)
        assert result.returncode == 0, result.stderr[-3000:]
        assert "xextra" in result.stdout
        assert sorted(_keys(s3, names["copy"])) == ["data/x", "extra.txt"]
        assert skyhop("storage", "delete", "-y", names["copy"], env=cli_env).returncode == 0
        # A second launch on the UP cluster brings buckets of its own; the first launch's stay its.
        again = skyhop("launch", "-y", "-c", cluster, "second.yaml", env=cli_env, cwd=tmp_path, timeout=300)
        assert again.returncode == 0, again.stderr[-3000:]
        assert _buckets(s3) == {names[r] for r in ("mount", "cached", "keep")}
    finally:
        down = skyhop("down", "-y", cluster, env=cli_env, timeout=300)
    assert down.returncode == 0, down.stderr[-2000:]
    assert _buckets(s3) == {names["keep"]}


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        (
            "{source: ./data}",
            "file_mounts: ~/d: source './data' is a local path (not a bucket URL), and a local source is "
            "uploaded to a bucket: give the bucket's name",
        ),
        ("{name: NAME, source: s3://other}", "names the bucket already; drop name"),
        ("{name: NAME, mode: COPY}", "COPY needs a source"),
        (
            "{name: NAME, source: ./data, mode: FAST}",
            "~/d.mode: Input should be 'MOUNT', 'COPY' or 'MOUNT_CACHED'",
        ),
        ("{name: NAME, source: ./data, size: 3}", "unknown storage field 'size'; allowed: name, source"),
        ("{name: NAME, source: ./missing}", "file_mounts.~/d.source: local path './missing' does not exist"),
        ("{name: NAME, source: ./data/f}", "is a file; a storage source is a folder"),
        ("hf://datasets/org/set", "Hugging Face sources (store: hf, hf://) are not supported yet"),
        ("ftp://host/x", "is not a supported URL"),
    ],
)
def test_bad_storage_entries_are_one_line_exit_2_and_create_nothing(
    cli_env: dict[str, str], s3: Any, tmp_path: Path, entry: str, says: str
) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "f").write_text("f")
    bucket = _names()["copy"]
    (tmp_path / "task.yaml").write_text(
        f"resources: {{infra: local}}\nfile_mounts: {{~/d: {entry.replace('NAME', bucket)}}}\nrun: 'true'\n"
    )
    cluster = unique_cluster()
    result = skyhop("launch", "-y", "-c", cluster, "task.yaml", env=cli_env, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert says in result.stderr and "Traceback" not in result.stderr
    assert _buckets(s3) == set()
    assert not (skyhop_home() / "clusters" / cluster).exists()


def test_dryrun_json_shows_the_storage_plan(cli_env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "task.yaml").write_text(
        "resources: {infra: local}\n"
        "file_mounts:\n"
        "  ~/d: {name: my-data-bkt, source: ./data, mode: MOUNT_CACHED, persistent: false}\n"
        "  ~/from-url: s3://public-bkt/sub/path\n"
        "  ~/w.bin: https://example.com/w.bin\n"
        "run: 'true'\n"
    )
    result = skyhop("launch", "--dryrun", "--json", "task.yaml", env=cli_env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    storage = json.loads(result.stdout)["items"][0]["storage"]
    assert storage == [
        {
            "target": "~/d",
            "mode": "MOUNT_CACHED",
            "bucket": {"store": "s3", "bucket": "my-data-bkt", "prefix": ""},
            "url": None,
            "create": True,
            "upload": [str((tmp_path / "data").resolve())],
            "upload_by_name": False,
            "persistent": False,
        },
        {
            "target": "~/from-url",
            "mode": "COPY",
            "bucket": {"store": "s3", "bucket": "public-bkt", "prefix": "sub/path"},
            "url": None,
            "create": False,
            "upload": [],
            "upload_by_name": False,
            "persistent": True,
        },
        {
            "target": "~/w.bin",
            "mode": "COPY",
            "bucket": None,
            "url": "https://example.com/w.bin",
            "create": False,
            "upload": [],
            "upload_by_name": False,
            "persistent": True,
        },
    ]


def test_stop_unmounts_and_start_mounts_again(
    live_worker: WorkerProcess, cli_env: dict[str, str], s3: Any, tmp_path: Path
) -> None:
    cluster = unique_cluster()
    bucket = _names()["mount"]
    (tmp_path / "task.yaml").write_text(
        "resources: {infra: local}\n"
        f"file_mounts: {{~/m: {{name: {bucket}, persistent: false}}}}\n"
        "run: 'true'\n"
    )
    home = skyhop_home() / "clusters" / cluster
    try:
        result = skyhop("launch", "-y", "-c", cluster, "task.yaml", env=cli_env, cwd=tmp_path, timeout=300)
        assert result.returncode == 0, result.stderr[-3000:]
        assert len(mounts_under(home)) == 1
        stopped = skyhop("stop", "-y", cluster, env=cli_env, timeout=300)
        assert stopped.returncode == 0, stopped.stderr[-2000:]
        assert mounts_under(home) == []
        started = skyhop("start", "-y", cluster, env=cli_env, timeout=300)
        assert started.returncode == 0, started.stderr[-2000:]
        assert len(mounts_under(home)) == 1
        ran = skyhop("exec", cluster, "echo again > ~/m/after-start.txt", env=cli_env, timeout=300)
        assert ran.returncode == 0, ran.stderr[-2000:]
        wait_for(lambda: "after-start.txt" in _keys(s3, bucket), what="a file written after start")
    finally:
        down = skyhop("down", "-y", cluster, env=cli_env, timeout=300)
    assert down.returncode == 0, down.stderr[-2000:]
    assert _buckets(s3) == set() and mounts_under(home.parent) == []
