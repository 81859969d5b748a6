"""Secrets stay with their owner: the payload key, Temporal's database and job specs (env values) are
readable by the user only, and a key that cannot be used is one clear line, not a traceback."""

from __future__ import annotations

import base64
import contextlib
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from skyhop.cli.config import TemporalConfig
from skyhop.cli.payload_key import PayloadKeyError, load_keyring, load_payload_key
from tests.conftest import skyhop
from tests.helpers import embedded_skyhop
from tests.unit.test_node_runner import _run_cli


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_concurrent_first_calls_agree_on_one_private_key(tmp_path: Path) -> None:
    env = {**os.environ, "SKYHOP_HOME": str(tmp_path / "home")}
    code = (
        "from cli.config import load_config; from cli.payload_key import load_payload_key; "
        "print(load_payload_key(load_config()).hex())"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(8)
    ]
    keys = {proc.communicate(timeout=60)[0].strip() for proc in procs}
    assert len(keys) == 1 and len(keys.pop()) == 64
    assert mode(tmp_path / "home") == 0o700
    assert mode(tmp_path / "home" / "key") == 0o600
    assert [p.name for p in (tmp_path / "home").iterdir()] == ["key"]  # no temporary file left


def test_key_sources_and_their_errors(tmp_path: Path) -> None:
    key_file = tmp_path / "deployment.key"
    key_file.write_text("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n")
    assert load_payload_key(TemporalConfig(key_file=str(key_file))) == bytes(range(32))
    assert load_payload_key(TemporalConfig(key=key_file.read_text(), key_file="/nonexistent")) == bytes(
        range(32)
    )
    with pytest.raises(PayloadKeyError, match="SKYHOP_KEY: not a skyhop payload key"):
        load_payload_key(TemporalConfig(key="c2hvcnQ="))
    with pytest.raises(PayloadKeyError, match="cannot read the skyhop payload key"):
        load_payload_key(TemporalConfig(key_file=str(tmp_path / "missing")))


def test_a_keyring_lists_keys_newest_first_in_a_file_or_in_skyhop_key(tmp_path: Path) -> None:
    new, old = base64.b64encode(bytes(range(1, 33))).decode(), base64.b64encode(bytes(range(32))).decode()
    key_file = tmp_path / "keyring"
    key_file.write_text(f"{new}\n{old}\n")
    expected = (bytes(range(1, 33)), bytes(range(32)))
    assert load_keyring(TemporalConfig(key_file=str(key_file))).keys == expected
    assert load_keyring(TemporalConfig(key=f"{new},{old}")).keys == expected
    assert load_payload_key(TemporalConfig(key=f"{new},{old}")) == expected[0]  # the newest encrypts
    with pytest.raises(PayloadKeyError, match=r"SKYHOP_KEY: not a skyhop payload key \(key 2"):
        load_keyring(TemporalConfig(key=f"{new},c2hvcnQ="))


def test_a_malformed_key_file_is_one_line_for_the_cli_and_the_worker(tmp_path: Path) -> None:
    key_file = tmp_path / "bad.key"
    key_file.write_text("not base64!\n")
    env = {**os.environ, "SKYHOP_KEY_FILE": str(key_file), "SKYHOP_TEMPORAL_ADDRESS": "127.0.0.1:1"}
    for args in (["status"], ["worker"]):
        result = skyhop(*args, env=env, timeout=60)
        assert result.returncode == 2, result
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and f"{key_file}: not a skyhop payload key" in lines[0], result.stderr


def test_a_job_spec_holding_env_values_is_owner_only(tmp_path: Path) -> None:
    assert _run_cli(tmp_path, "job", "true") == "started"
    assert mode(tmp_path / "jobs" / "job" / "spec.json") == 0o600


def test_the_embedded_server_keeps_its_folder_and_database_private(tmp_path: Path) -> None:
    with embedded_skyhop(tmp_path) as env:
        home = Path(env["SKYHOP_HOME"])
        home.mkdir(mode=0o755)  # as an older skyhop left it
        result = skyhop("server", "start", env=env)
        assert result.returncode == 0, result.stderr
        assert mode(home) == 0o700
        assert mode(home / "server") == 0o700
        assert mode(home / "key") == 0o600
        assert mode(home / "server" / "temporal.db") == 0o600
        for path in (home / "server").glob("temporal.db*"):  # WAL and journal files come and go
            with contextlib.suppress(FileNotFoundError):
                assert mode(path) == 0o600, path
        assert mode(home / "server" / "temporal.log") == 0o600
