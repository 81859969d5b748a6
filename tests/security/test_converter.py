"""The authenticating codec: a payload acts only if its MAC, made with this key, covers its bytes."""

from __future__ import annotations

import hashlib
import hmac

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.api.failure.v1 import Failure
from temporalio.exceptions import ApplicationError, CancelledError

from skyhop.contract import LaunchRequest
from skyhop.contract.converter import (
    KEY_ID_METADATA,
    MAC_METADATA,
    UNAUTHENTICATED_ENCODING,
    UNAUTHENTICATED_PAYLOAD,
    AuthenticatingCodec,
    canonical_bytes,
    key_id,
    skyhop_data_converter,
)
from skyhop.spec import Task
from tests.conftest import run

KEY = bytes(range(32))
OTHER_KEY = bytes(range(1, 33))
REQUEST = LaunchRequest(cluster_name="dev", task=Task(run="echo hi"))


def signed(request: LaunchRequest = REQUEST, key: bytes = KEY) -> Payload:
    [payload] = run(skyhop_data_converter(key).encode([request]))
    return payload


def decode(payload: Payload, key: bytes = KEY) -> LaunchRequest:
    [value] = run(skyhop_data_converter(key).decode([payload], [LaunchRequest]))
    assert isinstance(value, LaunchRequest)
    return value


def rejected(payload: Payload, key: bytes = KEY) -> ApplicationError:
    with pytest.raises(ApplicationError) as caught:
        decode(payload, key)
    error = caught.value
    assert error.type == UNAUTHENTICATED_PAYLOAD
    assert error.non_retryable
    assert "README" in error.message and "SKYHOP_KEY" in error.message
    return error


def test_a_signed_payload_round_trips_and_stays_readable_json() -> None:
    payload = signed()
    assert payload.metadata["encoding"] == b"json/plain"
    assert b'"cluster_name":"dev"' in payload.data  # the Web UI still shows the JSON
    assert payload.metadata[KEY_ID_METADATA] == key_id(KEY).encode()
    assert decode(payload) == REQUEST


def test_the_mac_is_the_documented_hmac_of_the_canonical_bytes() -> None:
    payload = signed()
    canonical = b"skyhop-payload-v1" + (10).to_bytes(4, "big") + b"json/plain" + payload.data
    assert canonical_bytes(b"json/plain", payload.data) == canonical
    assert payload.metadata[MAC_METADATA] == hmac.new(KEY, canonical, hashlib.sha256).hexdigest().encode()
    assert key_id(KEY) == hashlib.sha256(KEY).hexdigest()[:16]


def test_tampered_data_is_rejected() -> None:
    payload = signed()
    payload.data = payload.data.replace(b"echo hi", b"id >/tmp/x")
    assert "does not match" in rejected(payload).message


def test_tampered_encoding_is_rejected() -> None:
    payload = signed()
    payload.metadata["encoding"] = b"json/protobuf"
    rejected(payload)


def test_a_payload_without_mac_is_rejected() -> None:
    payload = signed()
    del payload.metadata[MAC_METADATA]
    assert "no skyhop-mac" in rejected(payload).message


def test_a_payload_signed_with_another_key_names_both_keys() -> None:
    message = rejected(signed(key=OTHER_KEY)).message
    assert key_id(OTHER_KEY) in message and key_id(KEY) in message


def test_a_forged_marker_or_extra_metadata_does_not_survive_decoding() -> None:
    forged = Payload(
        metadata={"encoding": UNAUTHENTICATED_ENCODING.encode(), "x-evil": b"1"}, data=b"attacker text"
    )
    [marker] = run(AuthenticatingCodec(KEY).decode([forged]))
    assert dict(marker.metadata) == {"encoding": UNAUTHENTICATED_ENCODING.encode()}
    assert b"attacker text" not in marker.data
    payload = signed()
    payload.metadata["x-evil"] = b"1"
    [clean] = run(AuthenticatingCodec(KEY).decode([payload]))
    assert dict(clean.metadata) == {"encoding": b"json/plain"}


def server_written() -> Payload:
    """The details the server writes when it cancels an activity no worker started (unsigned)."""
    return Payload(metadata={"encoding": b"json/plain"}, data=b'"ACTIVITY_ID_NOT_STARTED"')


def test_unsigned_cancellation_details_read_as_none_and_signed_ones_survive() -> None:
    failure = Failure(message="cancelled")
    failure.canceled_failure_info.details.payloads.extend([server_written(), signed()])
    error = run(skyhop_data_converter(KEY).decode_failure(failure))
    assert isinstance(error, CancelledError)
    assert error.details == (REQUEST.model_dump(mode="json"),)


def test_unsigned_details_of_any_other_failure_are_still_rejected() -> None:
    failure = Failure(message="setup failed")
    failure.application_failure_info.type = "SetupFailed"
    failure.application_failure_info.details.payloads.append(server_written())
    with pytest.raises(ApplicationError) as caught:
        run(skyhop_data_converter(KEY).decode_failure(failure))
    assert caught.value.type == UNAUTHENTICATED_PAYLOAD


def test_a_key_must_be_32_bytes() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        AuthenticatingCodec(b"short")
