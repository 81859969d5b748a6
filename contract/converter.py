"""skyhop's data converter: readable pydantic JSON payloads, each authenticated with the deployment key.

Anyone who can reach the Temporal frontend can start a workflow or schedule an activity on
skyhop's task queues; without this, that is anyone who can run a command as the worker's user.
So every payload carries an HMAC-SHA256 made with a 32-byte key that only the user (or the
deployment) holds, and the worker acts only on payloads whose MAC verifies.

The format (what a client in another language implements; README "The workflow contract"):

- ``data`` and the ``encoding`` metadata stay as the pydantic converter wrote them (``json/plain``
  and the JSON bytes), so the Web UI and ``temporal workflow show`` still read them.
- metadata ``skyhop-mac``: lowercase hex of HMAC-SHA256(key, canonical), where canonical is
  ``b"skyhop-payload-v1" + len(encoding).to_bytes(4, "big") + encoding + data``;
  the length prefix keeps encoding and data from being re-split.
- metadata ``skyhop-key-id``: the first 16 hex digits of SHA-256(key), so a key rotation can tell
  keys apart (and a mismatch names both keys' ids instead of just "bad MAC").

A payload that fails the check is not an error in the codec: the SDK runs codecs outside the
workflow, where an exception fails the workflow *task*, which Temporal retries forever. The codec
instead rewrites it to the ``binary/skyhop-unauthenticated`` encoding (its data is the reason;
nothing the sender wrote survives), and the payload converter for that encoding raises a
non-retryable ``ApplicationError`` of type ``UnauthenticatedPayload`` while arguments are
converted: a workflow then ends FAILED (temporalio lets a ``FailureError`` raised converting
arguments fail the workflow, not the task), an update or query is rejected, a signal is dropped,
and an activity fails before its body runs.

One payload field is the server's own: it cancels an activity no worker has started yet by
itself, writing the details ``"ACTIVITY_ID_NOT_STARTED"``, unsigned, and an activity awaited with
WAIT_CANCELLATION_COMPLETED resolves with them. Cancellation details make no worker act (skyhop
never reads them), so the failure converter reads unsigned ones as absent instead of failing the
cancelled workflow; every other field of a failure (an ``ApplicationError``'s details, which
skyhop does read) stays checked.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.api.failure.v1 import Failure
from temporalio.contrib.pydantic import PydanticPayloadConverter
from temporalio.converter import (
    DataConverter,
    DefaultFailureConverter,
    EncodingPayloadConverter,
    PayloadCodec,
    PayloadConverter,
)
from temporalio.exceptions import ApplicationError

__all__ = [
    "KEY_BYTES",
    "MAC_METADATA",
    "KEY_ID_METADATA",
    "UNAUTHENTICATED_ENCODING",
    "UNAUTHENTICATED_PAYLOAD",
    "AuthenticatingCodec",
    "SkyhopFailureConverter",
    "SkyhopPayloadConverter",
    "canonical_bytes",
    "key_id",
    "skyhop_data_converter",
]

KEY_BYTES = 32
MAC_METADATA = "skyhop-mac"
KEY_ID_METADATA = "skyhop-key-id"
UNAUTHENTICATED_ENCODING = "binary/skyhop-unauthenticated"
UNAUTHENTICATED_PAYLOAD = "UnauthenticatedPayload"
"""The ``ApplicationError`` type of a rejected payload (its failure type in history)."""
_DOMAIN = b"skyhop-payload-v1"
_HOW_TO = (
    "start skyhop workflows with the skyhop CLI, or sign payloads as README 'The workflow contract' "
    "says; the CLI and every worker must share one key (~/.skyhop/key, SKYHOP_KEY_FILE or SKYHOP_KEY)"
)


def key_id(key: bytes) -> str:
    """The public name of a key: the first 16 hex digits of its SHA-256."""
    return hashlib.sha256(key).hexdigest()[:16]


def canonical_bytes(encoding: bytes, data: bytes) -> bytes:
    """The bytes the MAC covers (documented in the module docstring and the README)."""
    return _DOMAIN + len(encoding).to_bytes(4, "big") + encoding + data


class AuthenticatingCodec(PayloadCodec):
    """Adds a MAC to every outgoing payload; turns an incoming payload whose MAC fails into a marker."""

    def __init__(self, key: bytes) -> None:
        if len(key) != KEY_BYTES:
            raise ValueError(f"a skyhop payload key is {KEY_BYTES} bytes, not {len(key)}")
        self._key = key
        self._key_id = key_id(key)

    def _mac(self, encoding: bytes, data: bytes) -> str:
        return hmac.new(self._key, canonical_bytes(encoding, data), hashlib.sha256).hexdigest()

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        signed = []
        for payload in payloads:
            out = Payload()
            out.CopyFrom(payload)
            encoding = payload.metadata.get("encoding", b"")
            out.metadata[MAC_METADATA] = self._mac(encoding, payload.data).encode()
            out.metadata[KEY_ID_METADATA] = self._key_id.encode()
            signed.append(out)
        return signed

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self._verified(payload) for payload in payloads]

    def _verified(self, payload: Payload) -> Payload:
        """The payload with only what the MAC covers (encoding, data), or a marker saying why not."""
        encoding = payload.metadata.get("encoding", b"")
        mac = payload.metadata.get(MAC_METADATA)
        if mac is None:
            return _marker(f"a payload ({encoding.decode(errors='replace')}) carries no skyhop-mac")
        if not hmac.compare_digest(mac, self._mac(encoding, payload.data).encode()):
            sender = payload.metadata.get(KEY_ID_METADATA, b"").decode(errors="replace")
            if sender and sender != self._key_id:
                return _marker(f"a payload is signed with key {sender[:16]!r}, not this key {self._key_id!r}")
            return _marker("a payload's skyhop-mac does not match its data")
        return Payload(metadata={"encoding": encoding}, data=payload.data)


def _marker(reason: str) -> Payload:
    return Payload(metadata={"encoding": UNAUTHENTICATED_ENCODING.encode()}, data=reason.encode())


class _UnauthenticatedConverter(EncodingPayloadConverter):
    """Never writes; reading a marker raises the non-retryable error that stops whoever reads it."""

    @property
    def encoding(self) -> str:
        return UNAUTHENTICATED_ENCODING

    def to_payload(self, value: Any) -> Payload | None:
        return None

    def from_payload(self, payload: Payload, type_hint: type | None = None) -> Any:
        reason = payload.data.decode(errors="replace")
        raise ApplicationError(
            f"rejected an unauthenticated payload: {reason}; {_HOW_TO}",
            type=UNAUTHENTICATED_PAYLOAD,
            non_retryable=True,
        )


class SkyhopPayloadConverter(PydanticPayloadConverter):
    """temporalio's pydantic JSON converter plus the reader of rejected payloads.

    Nullary, as the SDK needs: it re-creates the converter with ``type(self)()`` for each context.
    """

    def __init__(self) -> None:
        super().__init__()
        self._set_converters(*self.converters.values(), _UnauthenticatedConverter())


class SkyhopFailureConverter(DefaultFailureConverter):
    """temporalio's failure converter, reading unsigned cancellation details (the server's) as none."""

    def from_failure(self, failure: Failure, payload_converter: PayloadConverter) -> BaseException:
        if failure.HasField("canceled_failure_info") and _has_marker(
            failure.canceled_failure_info.details.payloads
        ):
            failure = _without_unsigned_cancel_details(failure)
        return super().from_failure(failure, payload_converter)


def _has_marker(payloads: Sequence[Payload]) -> bool:
    return any(p.metadata.get("encoding") == UNAUTHENTICATED_ENCODING.encode() for p in payloads)


def _without_unsigned_cancel_details(failure: Failure) -> Failure:
    copy = Failure()
    copy.CopyFrom(failure)
    details = copy.canceled_failure_info.details.payloads
    signed = [p for p in details if p.metadata.get("encoding") != UNAUTHENTICATED_ENCODING.encode()]
    del details[:]
    details.extend(signed)
    return copy


def skyhop_data_converter(key: bytes) -> DataConverter:
    """The data converter of every skyhop client and worker."""
    return DataConverter(
        payload_converter_class=SkyhopPayloadConverter,
        failure_converter_class=SkyhopFailureConverter,
        payload_codec=AuthenticatingCodec(key),
    )
