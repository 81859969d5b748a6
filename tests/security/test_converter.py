"""The encrypting codec: a payload acts only if it decrypts and authenticates under a key of the keyring."""

from __future__ import annotations

import hashlib
import hmac
import os
import zlib

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.api.failure.v1 import Failure
from temporalio.exceptions import ApplicationError, CancelledError

from skyhop.contract.clusters import LaunchRequest
from skyhop.contract.codec import (
    COMPRESS_FROM,
    ENCRYPTED_ENCODING,
    INNER_ENCODING_METADATA,
    KEY_ID_METADATA,
    UNAUTHENTICATED_ENCODING,
    EncryptingCodec,
    Keyring,
    key_id,
)
from skyhop.contract.converter import UNAUTHENTICATED_PAYLOAD, skyhop_data_converter
from skyhop.spec import Task
from tests.conftest import run

KEY = bytes(range(32))
OTHER_KEY = bytes(range(1, 33))
NEW_KEY = bytes(range(2, 34))
SECRET = "hf_codec_unit_value"
REQUEST = LaunchRequest(cluster_name="dev", task=Task(run="echo hi", secrets={"HF_TOKEN": SECRET}))


def encrypted(request: LaunchRequest = REQUEST, key: bytes = KEY, *older: bytes) -> Payload:
    [payload] = run(skyhop_data_converter(key, *older).encode([request]))
    return payload


def decode(payload: Payload, key: bytes = KEY, *older: bytes) -> LaunchRequest:
    [value] = run(skyhop_data_converter(key, *older).decode([payload], [LaunchRequest]))
    assert isinstance(value, LaunchRequest)
    return value


def rejected(payload: Payload, key: bytes = KEY, *older: bytes) -> ApplicationError:
    with pytest.raises(ApplicationError) as caught:
        decode(payload, key, *older)
    error = caught.value
    assert error.type == UNAUTHENTICATED_PAYLOAD
    assert error.non_retryable
    assert "README" in error.message and "SKYHOP_KEY" in error.message
    return error


def test_a_payload_round_trips_and_holds_nothing_in_clear() -> None:
    payload = encrypted()
    assert payload.metadata["encoding"] == ENCRYPTED_ENCODING.encode()
    assert payload.metadata[INNER_ENCODING_METADATA] == b"json/plain"
    assert payload.metadata[KEY_ID_METADATA] == key_id(KEY).encode()
    assert SECRET.encode() not in payload.SerializeToString() and b"echo hi" not in payload.data
    assert decode(payload) == REQUEST
    assert encrypted().data != payload.data  # a fresh nonce each time


def readme_aad(version: bytes) -> bytes:
    """The aad of a ``json/plain`` payload under ``KEY``, byte for byte as README spells it."""
    kid, encoding = key_id(KEY).encode(), b"json/plain"
    return (
        b"skyhop-payload"
        + version
        + len(kid).to_bytes(4, "big")
        + kid
        + len(encoding).to_bytes(4, "big")
        + encoding
    )


def made_by_hand(version: bytes, plaintext: bytes) -> Payload:
    """A payload as another client writes it from README: version, nonce, AES-GCM of ``plaintext``."""
    nonce = os.urandom(12)
    return Payload(
        metadata={
            "encoding": ENCRYPTED_ENCODING.encode(),
            "skyhop-encoding": b"json/plain",
            "skyhop-key-id": key_id(KEY).encode(),
        },
        data=version + nonce + AESGCM(KEY).encrypt(nonce, plaintext, readme_aad(version)),
    )


def test_the_data_is_the_documented_aes_gcm_of_the_json() -> None:
    """Raw ``cryptography`` calls, as the README describes the format: what another client writes."""
    payload = encrypted()
    version, nonce, sealed = payload.data[:1], payload.data[1:13], payload.data[13:]
    assert version == b"\x01" and len(sealed) > 16
    assert AESGCM(KEY).decrypt(nonce, sealed, readme_aad(b"\x01")) == REQUEST.model_dump_json().encode()
    # ...and the other way: a payload made by hand from the description decodes.
    assert decode(made_by_hand(b"\x01", REQUEST.model_dump_json().encode())) == REQUEST
    assert key_id(KEY) == hashlib.sha256(KEY).hexdigest()[:16]


def test_tampered_ciphertext_is_rejected() -> None:
    payload = encrypted()
    payload.data = payload.data[:20] + bytes([payload.data[20] ^ 1]) + payload.data[21:]
    assert "altered" in rejected(payload).message


@pytest.mark.parametrize(
    ("field", "value"),
    [(INNER_ENCODING_METADATA, b"json/protobuf"), (KEY_ID_METADATA, key_id(OTHER_KEY).encode())],
)
def test_tampered_metadata_is_rejected(field: str, value: bytes) -> None:
    """The inner encoding and the key id are associated data: changing either fails the tag."""
    payload = encrypted(REQUEST, KEY, OTHER_KEY)
    payload.metadata[field] = value
    assert "altered" in rejected(payload, KEY, OTHER_KEY).message


def test_an_unknown_version_byte_is_refused_by_name() -> None:
    payload = encrypted()
    payload.data = b"\x03" + payload.data[1:]
    assert "format version 03" in rejected(payload).message


LARGE = LaunchRequest(cluster_name="dev", task=Task(run="echo step\n" * 2_000, secrets={"HF_TOKEN": SECRET}))


def test_a_large_payload_is_compressed_then_encrypted_as_documented() -> None:
    """Version 2: the JSON zlib-compressed, then as version 1, with 0x02 in the data and the aad."""
    payload = encrypted(LARGE)
    clear = LARGE.model_dump_json().encode()
    version, nonce, sealed = payload.data[:1], payload.data[1:13], payload.data[13:]
    assert version == b"\x02" and len(payload.data) < len(clear) // 10
    assert zlib.decompress(AESGCM(KEY).decrypt(nonce, sealed, readme_aad(b"\x02"))) == clear
    assert decode(payload) == LARGE
    # ...and one made by hand from the description (at another zlib level) decodes.
    assert decode(made_by_hand(b"\x02", zlib.compress(clear, 9))) == LARGE


def test_a_version_2_payload_that_is_not_zlib_is_refused() -> None:
    """Only a holder of the key can make one (a client's bug): refused by name, not a traceback."""
    payload = made_by_hand(b"\x02", REQUEST.model_dump_json().encode())
    assert "does not decompress" in rejected(payload).message


def test_a_compressed_payload_passed_off_as_version_1_fails_its_tag() -> None:
    payload = encrypted(LARGE)
    payload.data = b"\x01" + payload.data[1:]
    assert "altered" in rejected(payload).message


@pytest.mark.parametrize("data", [b"x" * (COMPRESS_FROM - 1), os.urandom(4 * COMPRESS_FROM)])
def test_a_small_or_incompressible_payload_stays_version_1(data: bytes) -> None:
    codec = EncryptingCodec(Keyring((KEY,)))
    payload = codec.encrypt(Payload(metadata={"encoding": b"binary/plain"}, data=data))
    assert payload.data[:1] == b"\x01"
    assert codec.decrypt(payload).data == data


def test_a_plain_payload_is_rejected() -> None:
    plain = Payload(metadata={"encoding": b"json/plain"}, data=REQUEST.model_dump_json().encode())
    assert "not encrypted with a skyhop key" in rejected(plain).message


def test_a_payload_of_another_key_names_both_keys() -> None:
    message = rejected(encrypted(key=OTHER_KEY)).message
    assert key_id(OTHER_KEY) in message and key_id(KEY) in message


def test_rotation_reads_old_payloads_and_writes_with_the_new_key() -> None:
    old = encrypted(key=KEY)
    assert decode(old, NEW_KEY, KEY) == REQUEST
    new = encrypted(REQUEST, NEW_KEY, KEY)
    assert new.metadata[KEY_ID_METADATA] == key_id(NEW_KEY).encode()
    assert decode(new, NEW_KEY, KEY) == REQUEST
    rejected(new, KEY)  # a worker not yet given the new key refuses it, naming it


def test_a_clear_text_signed_payload_of_before_is_still_read() -> None:
    """Histories written before encryption (and openssl-signed inputs) carry ``skyhop-mac``."""
    data, encoding = REQUEST.model_dump_json().encode(), b"json/plain"
    canonical = b"skyhop-payload-v1" + len(encoding).to_bytes(4, "big") + encoding + data
    mac = hmac.new(OTHER_KEY, canonical, hashlib.sha256).hexdigest().encode()
    signed = Payload(metadata={"encoding": encoding, "skyhop-mac": mac}, data=data)
    assert decode(signed, KEY, OTHER_KEY) == REQUEST
    signed.data = data.replace(b"echo hi", b"id >/tmp/x")
    assert "does not match" in rejected(signed, KEY, OTHER_KEY).message


def test_a_forged_marker_or_extra_metadata_does_not_survive_decoding() -> None:
    codec = EncryptingCodec(Keyring((KEY,)))
    forged = Payload(
        metadata={"encoding": UNAUTHENTICATED_ENCODING.encode(), "x-evil": b"1"}, data=b"attacker text"
    )
    [marker] = run(codec.decode([forged]))
    assert dict(marker.metadata) == {"encoding": UNAUTHENTICATED_ENCODING.encode()}
    assert b"attacker text" not in marker.data
    payload = encrypted()
    payload.metadata["x-evil"] = b"1"
    [clean] = run(codec.decode([payload]))
    assert dict(clean.metadata) == {"encoding": b"json/plain"}


def test_failure_messages_are_encrypted_too() -> None:
    """A failure's message may quote a task; it travels in the encrypted ``encoded_attributes``."""
    converter = skyhop_data_converter(KEY)
    failure = Failure()
    run(converter.encode_failure(ApplicationError(f"setup printed {SECRET}", type="SetupFailed"), failure))
    assert SECRET.encode() not in failure.SerializeToString()
    error = run(converter.decode_failure(failure))
    assert isinstance(error, ApplicationError) and SECRET in error.message


def test_a_rejected_payloads_error_stays_readable_without_the_key() -> None:
    """Whoever sent it lacks the key: the error saying how to fix that must not be encrypted."""
    failure = Failure()
    refusal = ApplicationError("rejected an unauthenticated payload: README", type=UNAUTHENTICATED_PAYLOAD)
    run(skyhop_data_converter(KEY).encode_failure(refusal, failure))
    assert failure.message == refusal.message and not failure.HasField("encoded_attributes")


def server_written() -> Payload:
    """The details the server writes when it cancels an activity no worker started (in clear)."""
    return Payload(metadata={"encoding": b"json/plain"}, data=b'"ACTIVITY_ID_NOT_STARTED"')


def test_unencrypted_cancellation_details_read_as_none_and_encrypted_ones_survive() -> None:
    failure = Failure(message="cancelled")
    failure.canceled_failure_info.details.payloads.extend([server_written(), encrypted()])
    error = run(skyhop_data_converter(KEY).decode_failure(failure))
    assert isinstance(error, CancelledError)
    assert error.details == (REQUEST.model_dump(mode="json"),)


def test_unencrypted_details_of_any_other_failure_are_still_rejected() -> None:
    failure = Failure(message="setup failed")
    failure.application_failure_info.type = "SetupFailed"
    failure.application_failure_info.details.payloads.append(server_written())
    with pytest.raises(ApplicationError) as caught:
        run(skyhop_data_converter(KEY).decode_failure(failure))
    assert caught.value.type == UNAUTHENTICATED_PAYLOAD


def test_a_key_must_be_32_bytes() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        Keyring((KEY, b"short"))
