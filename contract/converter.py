"""skyhop's data converter: pydantic JSON payloads, encrypted and authenticated by ``codec.py``.

Anyone who can reach the Temporal frontend can start a workflow or schedule an activity on
skyhop's task queues, and anyone who can read history reads its payloads. So every payload (and
every failure's message and stack trace, which the failure converter moves into a payload) goes
through ``EncryptingCodec`` with a key only the user (or the deployment) holds: the worker acts only
on payloads that authenticate under its keyring, and history holds no task's env or secret in clear.

A payload the codec refused reaches the payload converter as the ``binary/skyhop-unauthenticated``
encoding, which raises a non-retryable ``ApplicationError`` of type ``UnauthenticatedPayload`` while
arguments are converted: a workflow then ends FAILED (temporalio lets a ``FailureError`` raised
converting arguments fail the workflow, not the task), an update or query is rejected, a signal is
dropped, and an activity fails before its body runs.

One payload field is the server's own: it cancels an activity no worker has started yet by
itself, writing the details ``"ACTIVITY_ID_NOT_STARTED"``, unencrypted, and an activity awaited with
WAIT_CANCELLATION_COMPLETED resolves with them. Cancellation details make no worker act (skyhop
never reads them), so the failure converter reads unauthenticated ones as absent instead of failing
the cancelled workflow; every other field of a failure (an ``ApplicationError``'s details, which
skyhop does read) stays checked.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.api.failure.v1 import Failure
from temporalio.contrib.pydantic import PydanticPayloadConverter
from temporalio.converter import (
    DataConverter,
    DefaultFailureConverter,
    EncodingPayloadConverter,
    PayloadConverter,
)
from temporalio.exceptions import ApplicationError

from skyhop.contract.codec import UNAUTHENTICATED_ENCODING, EncryptingCodec, Keyring

__all__ = [
    "UNAUTHENTICATED_PAYLOAD",
    "SkyhopFailureConverter",
    "SkyhopPayloadConverter",
    "skyhop_data_converter",
]

UNAUTHENTICATED_PAYLOAD = "UnauthenticatedPayload"
"""The ``ApplicationError`` type of a rejected payload (its failure type in history)."""
_HOW_TO = (
    "start skyhop workflows with the skyhop CLI, or encrypt payloads as README 'Payload encryption' "
    "says; the CLI and every worker must share one keyring (~/.skyhop/key, SKYHOP_KEY_FILE or SKYHOP_KEY)"
)


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
    """temporalio's failure converter with messages and stack traces encrypted (they may quote a
    task), reading unauthenticated cancellation details (the server's) as none.

    A rejected payload's error stays in clear: it quotes nothing the sender wrote, and the sender,
    who lacks the key, is the one who must read how to fix it.
    """

    def __init__(self) -> None:
        super().__init__(encode_common_attributes=True)

    def to_failure(
        self, exception: BaseException, payload_converter: PayloadConverter, failure: Failure
    ) -> None:
        if isinstance(exception, ApplicationError) and exception.type == UNAUTHENTICATED_PAYLOAD:
            DefaultFailureConverter().to_failure(exception, payload_converter, failure)
        else:
            super().to_failure(exception, payload_converter, failure)

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


def skyhop_data_converter(key: bytes, *older: bytes) -> DataConverter:
    """The data converter of every skyhop client and worker: encrypts with ``key``, also reads ``older``."""
    return DataConverter(
        payload_converter_class=SkyhopPayloadConverter,
        failure_converter_class=SkyhopFailureConverter,
        payload_codec=EncryptingCodec(Keyring((key, *older))),
    )
