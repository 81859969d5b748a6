"""skyhop's own SSH key pair, which every cloud node it creates trusts: ``~/.skyhop/keys/skyhop``.

Generated once (ed25519) the first time a cloud needs it; AWS imports the public half as a key
pair, GCP puts it in instance metadata, Azure in the VM's ``osProfile``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from skyhop.providers.home import skyhop_home

__all__ = ["key_paths", "public_key"]


def key_paths() -> tuple[Path, Path]:
    """(private key, public key) paths; the key is created when missing."""
    folder = skyhop_home() / "keys"
    private, public = folder / "skyhop", folder / "skyhop.pub"
    if public.exists():
        return private, public
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not public.exists():
            _generate(private, public)
    return private, public


def public_key() -> str:
    """The public key in OpenSSH's one-line form."""
    return key_paths()[1].read_text().strip()


def _generate(private: Path, public: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    )
    line = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    fd = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    tmp = public.with_suffix(".tmp")
    tmp.write_bytes(line + b" skyhop\n")
    with contextlib.suppress(FileNotFoundError):
        os.replace(tmp, public)
