"""skyhop's node SSH key pair, which every cloud node it creates trusts: one per deployment.

AWS imports the public half as a key pair (named after the key's fingerprint), GCP puts it in
instance metadata, Azure in the VM's ``osProfile``. A node made by one worker must accept every
other worker, so the key is a deployment secret (``storage/secrets.py``): kept in the content store
sealed with the payload key, created by the first machine that needs it, and cached on each
machine as ``~/.skyhop/keys/skyhop`` (0600) next to the store URL it came from. A machine that
already had its own key from before (one key per machine) offers that one when the store has
none yet, so the nodes it made stay reachable.

The payload keyring comes from the process's Temporal connection (``use_payload_keyring``, called
when the CLI or a worker connects): the providers layer does not read the CLI's configuration.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from skyhop.providers.home import private_dir, skyhop_home

if TYPE_CHECKING:
    from skyhop.contract.codec import Keyring
    from skyhop.storage.content import StoreConfig

__all__ = ["NODE_KEY_SECRET", "key_fingerprint", "key_paths", "public_key", "use_payload_keyring"]

NODE_KEY_SECRET = "node-ssh-key"
"""The node key's name among the deployment's secrets."""

_keyring: Keyring | None = None


def use_payload_keyring(keyring: Keyring) -> None:
    """Seal and open the node key with ``keyring`` (this process's payload keys)."""
    global _keyring
    _keyring = keyring


def key_paths() -> tuple[Path, Path]:
    """(private key, public key) paths of the deployment's key, fetched or created when missing."""
    from skyhop.storage.content import load_store_config

    folder = skyhop_home() / "keys"
    private, public, source = folder / "skyhop", folder / "skyhop.pub", folder / "skyhop.store"
    store = load_store_config()
    if _cached(public, source, store.url):
        return private, public
    private_dir(folder)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _cached(public, source, store.url):
            pem = _fetch(store, private)
            _install(pem, private, public)
            _write(source, store.url.encode(), 0o600)
    return private, public


def public_key() -> str:
    """The public key in OpenSSH's one-line form."""
    return key_paths()[1].read_text().strip()


def key_fingerprint() -> str:
    """What names the key outside skyhop (the AWS key pair ``skyhop-<fingerprint>``)."""
    return hashlib.sha256(public_key().encode()).hexdigest()[:12]


def _cached(public: Path, source: Path, url: str) -> bool:
    try:
        return public.is_file() and source.read_text() == url
    except OSError:
        return False


def _fetch(store: StoreConfig, private: Path) -> bytes:
    """The deployment's key from the store (made now if it has none), as a provider error when not:
    a launch then fails over or stops with the store's one-line reason instead of retrying."""
    from skyhop.providers.errors import ProviderUnavailableError, TransientError
    from skyhop.storage.errors import RETRY_CANNOT_FIX, StorageError
    from skyhop.storage.secrets import shared_secret

    try:
        return shared_secret(store.open(), NODE_KEY_SECRET, _require_keyring(), lambda: _adopt(private))
    except StorageError as exc:
        message = f"skyhop's node SSH key: {exc}"
        if type(exc).__name__ in RETRY_CANNOT_FIX:
            raise ProviderUnavailableError(message, "NodeKeyUnavailable", leftover=False) from None
        raise TransientError(message, "NodeKeyUnavailable", leftover=False) from None


def _require_keyring() -> Keyring:
    if _keyring is None:
        raise RuntimeError(
            "the node SSH key is sealed with the payload key, which this process has not loaded: "
            "connect to Temporal (skyhop.cli.client.connect) first"
        )
    return _keyring


def _adopt(private: Path) -> bytes:
    """This machine's key from before keys were shared, else a new ed25519 key (OpenSSH PEM)."""
    if private.is_file():
        return private.read_bytes()
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    )


def _install(pem: bytes, private: Path, public: Path) -> None:
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_ssh_private_key(pem, password=None)
    line = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    _write(private, pem, 0o600)
    _write(public, line + b" skyhop\n", 0o644)


def _write(path: Path, data: bytes, mode: int) -> None:
    """Replace ``path`` atomically: a reader without the lock sees the old file or the new one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
