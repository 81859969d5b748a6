"""The API's error shape: a ``Status`` object with ``reason`` and ``code``, raised as ``StatusError``."""

from __future__ import annotations

import datetime
from typing import Any

__all__ = ["StatusError", "not_found", "status", "timestamp"]


def timestamp(at: float | None = None) -> str:
    """RFC 3339 in UTC, to the second, as the API writes ``creationTimestamp``."""
    moment = (
        datetime.datetime.now(datetime.UTC)
        if at is None
        else datetime.datetime.fromtimestamp(at, datetime.UTC)
    )
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def status(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success" if code < 400 else "Failure",
        "code": code,
    }
    if message:
        body["message"] = message
    if reason:
        body["reason"] = reason
    if details:
        body["details"] = details
    return body


class StatusError(Exception):
    """An API error; the HTTP layer answers ``code`` with ``body``."""

    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.body = status(code, reason, message, details)


def not_found(resource: str, name: str) -> StatusError:
    return StatusError(404, "NotFound", f'{resource} "{name}" not found', {"name": name, "kind": resource})
