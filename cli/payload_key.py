"""The payload keyring: 32-byte keys that only this user (or the deployment) holds, newest first.

Every payload skyhop's CLI and workers exchange is encrypted and authenticated with the newest key
(``contract/codec.py``), so a workflow started by anyone else runs nothing and history holds no
value in clear; the older keys only decrypt, which is what a key rotation needs. Sources, first
found wins: ``SKYHOP_KEY`` (base64 keys separated by commas or whitespace),
``SKYHOP_KEY_FILE`` / ``temporal.key_file``, else ``~/.skyhop/key``, created on first use with one
key. A key file holds one key per line as base64 (so a line can be copied into ``SKYHOP_KEY``).
"""

from __future__ import annotations

import base64
import binascii
import os
import secrets
from pathlib import Path

from skyhop.cli.config import ConfigError, TemporalConfig
from skyhop.contract.codec import KEY_BYTES, Keyring
from skyhop.providers.home import private_dir, skyhop_home

__all__ = ["PayloadKeyError", "default_key_file", "load_keyring", "load_payload_key"]

_KEY_BYTES = KEY_BYTES


class PayloadKeyError(ConfigError):
    """The payload key is unreadable or malformed."""


def default_key_file() -> Path:
    """``~/.skyhop/key`` (or under ``SKYHOP_HOME``)."""
    return skyhop_home() / "key"


def load_keyring(config: TemporalConfig) -> Keyring:
    """The keys this CLI or worker encrypts with (the first) and decrypts with (all)."""
    if config.key:
        return _parse(config.key, "SKYHOP_KEY")
    if config.key_file:
        return _read(Path(config.key_file).expanduser())
    path = default_key_file()
    if not path.exists():
        _create(path)
    return _read(path)


def load_payload_key(config: TemporalConfig) -> bytes:
    """The key this CLI or worker encrypts payloads with: the keyring's newest."""
    return load_keyring(config).current


def _parse(text: str, where: str) -> Keyring:
    keys = []
    for number, item in enumerate(text.replace(",", " ").split(), start=1):
        try:
            key = base64.b64decode(item, validate=True)
        except binascii.Error:
            key = b""
        if len(key) != _KEY_BYTES:
            raise PayloadKeyError(
                f"{where}: not a skyhop payload key (key {number}: expected base64 of {_KEY_BYTES} bytes, "
                "e.g. the output of: head -c 32 /dev/urandom | base64)"
            )
        keys.append(key)
    if not keys:
        raise PayloadKeyError(f"{where}: holds no key (expected one base64 line per key, newest first)")
    return Keyring(tuple(keys))


def _read(path: Path) -> Keyring:
    try:
        text = path.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not ASCII base64"
        raise PayloadKeyError(f"{path}: cannot read the skyhop payload key ({reason})") from None
    return _parse(text, str(path))


def _create(path: Path) -> None:
    """Write a new key so that concurrent first calls agree on one.

    The key is written and synced under a private temporary name (``O_CREAT | O_EXCL``, mode 0600),
    then hard-linked to its final name: ``link`` fails if the name exists, like ``O_EXCL``, but no
    reader can ever see a half-written key. The loser of a race drops its key and reads the winner's.
    """
    private_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, base64.b64encode(secrets.token_bytes(_KEY_BYTES)) + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    finally:
        tmp.unlink()
