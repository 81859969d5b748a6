"""Deployment secrets: named objects in the content store, sealed with the payload key.

Some state must be the same on every worker, and secret: the node SSH key every cloud node trusts.
The content store is the one place every worker and the CLI reach, but whoever reads the bucket
must not get the secret, so it is stored encrypted and authenticated under the payload keyring,
the same AES-GCM payload format as history (``contract/codec.py``): a secret made under an older
key still opens after a rotation, and one from another deployment is refused, not used.

Layout under the store's root: ``secrets/<name>``, the sealed payload (a Temporal ``Payload``
protobuf, as the codec writes it). The first machine to need a secret creates it with a
conditional write (``ContentStore.put_if_absent``), so two workers racing end with one secret.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from skyhop.storage.content import ContentStore
from skyhop.storage.errors import ContentNotFoundError, SealedSecretError

if TYPE_CHECKING:
    from skyhop.contract.codec import Keyring

__all__ = ["secret_key", "shared_secret"]

_ENCODING = b"binary/plain"


def secret_key(name: str) -> str:
    return f"secrets/{name}"


def shared_secret(store: ContentStore, name: str, keyring: Keyring, make: Callable[[], bytes]) -> bytes:
    """The deployment's secret ``name``; ``make()`` gives its value when this call creates it."""
    key = secret_key(name)
    try:
        return _open(store, key, keyring, store.get_bytes(key))
    except ContentNotFoundError:
        pass
    value = make()
    if store.put_if_absent(key, _seal(keyring, value)):
        return value
    # Another machine created it between the read and the write: theirs is the deployment's.
    return _open(store, key, keyring, store.get_bytes(key))


def _seal(keyring: Keyring, value: bytes) -> bytes:
    from temporalio.api.common.v1 import Payload

    from skyhop.contract.codec import EncryptingCodec

    sealed = EncryptingCodec(keyring).encrypt(Payload(metadata={"encoding": _ENCODING}, data=value))
    return sealed.SerializeToString()


def _open(store: ContentStore, key: str, keyring: Keyring, data: bytes) -> bytes:
    from google.protobuf.message import DecodeError
    from temporalio.api.common.v1 import Payload

    from skyhop.contract.codec import UNAUTHENTICATED_ENCODING, EncryptingCodec

    try:
        sealed = Payload.FromString(data)
    except DecodeError:
        sealed = Payload()
    opened = EncryptingCodec(keyring).decrypt(sealed)
    if opened.metadata.get("encoding") == UNAUTHENTICATED_ENCODING.encode():
        raise SealedSecretError(
            "",
            f"{store.url}/{key} does not open with this machine's payload key ({opened.data.decode()}): "
            "every worker and the CLI of one deployment must use the same SKYHOP_KEY",
        )
    return opened.data
