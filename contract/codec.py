"""skyhop's payload codec: every payload encrypted and authenticated with AES-256-GCM under a 32-byte key.

History is readable by whoever can read Temporal (its database, its Web UI, ``temporal workflow
show``), and skyhop's payloads hold task env and secret values. So each payload skyhop writes is
encrypted; the GCM tag authenticates it too, so the worker acts only on payloads made with a key
only the user (or the deployment) holds. One codec serves both purposes.

The format, version 1 (README "Payload encryption" says the same for clients in other languages):

- metadata ``encoding`` = ``binary/skyhop-encrypted``
- metadata ``skyhop-encoding`` = the payload's own encoding before encryption (``json/plain``,
  ``binary/null``, ...), so a decoder can restore it
- metadata ``skyhop-key-id`` = the key's id: the first 16 hex digits (lowercase) of SHA-256(key)
- ``data`` = ``0x01`` (the version) || nonce (12 random bytes) || AES-256-GCM(key, nonce, plaintext,
  aad) (the ciphertext, then the 16-byte tag); plaintext is the payload's own ``data``
- aad = ``b"skyhop-payload"`` || ``0x01`` || u32be(len(key id)) || key id || u32be(len(inner
  encoding)) || inner encoding: the metadata is authenticated, so swapping encodings or key ids
  fails the tag like tampered data does. Other metadata is neither written nor kept.

Version 2 is version 1 with the plaintext zlib-compressed (RFC 1950) before encryption, and
``0x02`` as the version byte in ``data`` and in the aad. It is written for a payload of
``COMPRESS_FROM`` bytes or more that compresses smaller: the server, the worker and the client
each spend time per byte a payload holds, and a job index shard's answer (a thousand rows, 250 KB
of JSON) compresses to 15 KB. A decoder of version 1 only refuses it by its version, never misreads
it. What compression reveals is how compressible a payload is (its length), never its bytes.

Key rotation: a keyring holds the current key (it encrypts) and older ones (they only decrypt);
a payload names its key by id, so old payloads stay readable while new ones use the new key.

Decoding also accepts the clear-text signed format skyhop wrote before encryption (``skyhop-mac``:
HMAC-SHA256 over ``b"skyhop-payload-v1"`` || u32be(len(encoding)) || encoding || data), so
histories written then still replay and a script can still sign a JSON input with ``openssl``;
skyhop never writes it.

A payload that fails is not an error here: the SDK runs codecs outside the workflow, where an
exception fails the workflow *task*, which Temporal retries forever. The codec rewrites it to the
``binary/skyhop-unauthenticated`` encoding instead (its data is the reason; nothing the sender wrote
survives), and ``converter.py``'s payload converter turns that into a non-retryable error.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

__all__ = [
    "COMPRESSED_VERSION",
    "COMPRESS_FROM",
    "ENCRYPTED_ENCODING",
    "FORMAT_VERSION",
    "INNER_ENCODING_METADATA",
    "KEY_BYTES",
    "KEY_ID_METADATA",
    "MAC_METADATA",
    "NONCE_BYTES",
    "UNAUTHENTICATED_ENCODING",
    "EncryptingCodec",
    "Keyring",
    "associated_data",
    "key_id",
    "signed_bytes",
]

KEY_BYTES = 32
NONCE_BYTES = 12
FORMAT_VERSION = 1
COMPRESSED_VERSION = 2
COMPRESS_FROM = 1024
"""Smaller payloads (most of them: a status, an id, a short record) are not worth compressing."""
_COMPRESSION_LEVEL = 1
"""zlib's fastest: a job index shard's 250 KB of JSON rows in about a millisecond, to 6% of their size."""
ENCRYPTED_ENCODING = "binary/skyhop-encrypted"
INNER_ENCODING_METADATA = "skyhop-encoding"
KEY_ID_METADATA = "skyhop-key-id"
MAC_METADATA = "skyhop-mac"
"""The clear-text signed format's MAC (read, never written)."""
UNAUTHENTICATED_ENCODING = "binary/skyhop-unauthenticated"
_READ_VERSIONS = (bytes([FORMAT_VERSION]), bytes([COMPRESSED_VERSION]))
_AAD_DOMAIN = b"skyhop-payload"
_MAC_DOMAIN = b"skyhop-payload-v1"


def key_id(key: bytes) -> str:
    """The public name of a key: the first 16 hex digits of its SHA-256."""
    return hashlib.sha256(key).hexdigest()[:16]


def _framed(*fields: bytes) -> bytes:
    return b"".join(len(field).to_bytes(4, "big") + field for field in fields)


def associated_data(key_id: bytes, encoding: bytes, version: int = FORMAT_VERSION) -> bytes:
    """The bytes GCM authenticates besides the data: the version (1, or 2: compressed), key id and
    inner encoding."""
    return _AAD_DOMAIN + bytes([version]) + _framed(key_id, encoding)


def signed_bytes(encoding: bytes, data: bytes) -> bytes:
    """The bytes the clear-text format's ``skyhop-mac`` covers."""
    return _MAC_DOMAIN + _framed(encoding) + data


@dataclass(frozen=True)
class Keyring:
    """The keys of one deployment, newest first: the first encrypts, every one decrypts."""

    keys: tuple[bytes, ...]

    def __post_init__(self) -> None:
        if not self.keys:
            raise ValueError("a keyring needs at least one key")
        for key in self.keys:
            if len(key) != KEY_BYTES:
                raise ValueError(f"a skyhop payload key is {KEY_BYTES} bytes, not {len(key)}")

    @property
    def current(self) -> bytes:
        return self.keys[0]

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(key_id(key) for key in self.keys)


class EncryptingCodec(PayloadCodec):
    """Encrypts every outgoing payload with the current key; turns one that fails to decrypt into a marker."""

    def __init__(self, keyring: Keyring) -> None:
        self._keyring = keyring
        self._current_id = key_id(keyring.current).encode()
        # Each key's id and cipher once, not per payload: a worker decrypts every payload of every
        # activation, and hashing every key and setting up a cipher each time made a decrypt 7.3 µs,
        # not 4.7.
        self._aead_by_id = {key_id(key).encode(): AESGCM(key) for key in keyring.keys}
        self._aead = self._aead_by_id[self._current_id]

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.encrypt(payload) for payload in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.decrypt(payload) for payload in payloads]

    def encrypt(self, payload: Payload) -> Payload:
        encoding = payload.metadata.get("encoding", b"")
        version, plain = FORMAT_VERSION, payload.data
        if len(plain) >= COMPRESS_FROM:
            packed = zlib.compress(plain, _COMPRESSION_LEVEL)
            if len(packed) < len(plain):
                version, plain = COMPRESSED_VERSION, packed
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._aead.encrypt(nonce, plain, associated_data(self._current_id, encoding, version))
        return Payload(
            metadata={
                "encoding": ENCRYPTED_ENCODING.encode(),
                INNER_ENCODING_METADATA: encoding,
                KEY_ID_METADATA: self._current_id,
            },
            data=bytes([version]) + nonce + sealed,
        )

    def decrypt(self, payload: Payload) -> Payload:
        """The payload as it was before encryption, or a marker saying why it is refused."""
        encoding = payload.metadata.get("encoding", b"")
        if encoding != ENCRYPTED_ENCODING.encode():
            return self._verified_clear_text(payload, encoding)
        inner = payload.metadata.get(INNER_ENCODING_METADATA, b"")
        sender = payload.metadata.get(KEY_ID_METADATA, b"")
        aead = self._aead_by_id.get(sender)
        if aead is None:
            held = ", ".join(self._keyring.ids)
            named = sender.decode(errors="replace")[:16]
            return marker(f"a payload is encrypted with key {named!r}, not one of this keyring's ({held})")
        version, data = payload.data[:1], payload.data[1:]
        if version not in _READ_VERSIONS:
            found = version.hex() or "none"
            readable = f"{FORMAT_VERSION} and {COMPRESSED_VERSION}"
            return marker(f"a payload is in format version {found}; this skyhop reads {readable}")
        try:
            plain = aead.decrypt(
                data[:NONCE_BYTES], data[NONCE_BYTES:], associated_data(sender, inner, version[0])
            )
        except (InvalidTag, ValueError):
            return marker("a payload does not authenticate under its key: its data or metadata was altered")
        if version[0] == COMPRESSED_VERSION:
            try:
                plain = zlib.decompress(plain)
            except zlib.error:
                return marker("a compressed payload authenticates but does not decompress")
        return Payload(metadata={"encoding": inner}, data=plain)

    def _verified_clear_text(self, payload: Payload, encoding: bytes) -> Payload:
        mac = payload.metadata.get(MAC_METADATA)
        if mac is None:
            return marker(
                f"a payload ({encoding.decode(errors='replace')}) is not encrypted with a skyhop key"
            )
        canonical = signed_bytes(encoding, payload.data)
        for key in self._keyring.keys:
            if hmac.compare_digest(mac, hmac.new(key, canonical, hashlib.sha256).hexdigest().encode()):
                return Payload(metadata={"encoding": encoding}, data=payload.data)
        return marker("a payload's skyhop-mac does not match its data under any key of this keyring")


def marker(reason: str) -> Payload:
    """What a refused payload becomes: only the reason survives, nothing the sender wrote."""
    return Payload(metadata={"encoding": UNAUTHENTICATED_ENCODING.encode()}, data=reason.encode())
