"""A local Cloud Storage JSON API for contract tests of the ``gcs`` bucket store, checking every request.

It serves what google-cloud-storage and rclone send, with the documented shapes: ``buckets``
insert, get, list (paged), delete (409 while objects remain); ``objects`` insert
(``uploadType=multipart`` for small files, ``uploadType=resumable`` sessions whose chunks must be
256 KiB multiples and contiguous), list (paged, ``prefix``, ``delimiter``), get (metadata, or
``alt=media`` on the download path) and delete; and the OAuth token endpoint of the test's
service-account key. Every call needs a bearer token of that account. Names and labels are checked
against Cloud Storage's rules. ``foreign`` holds buckets of other projects: the name is taken
(insert 409) and this account may not read them (403).
"""

from __future__ import annotations

import base64
import email.parser
import email.policy
import hashlib
import itertools
import json
import re
import urllib.parse
from pathlib import Path
from typing import Any

import google_crc32c

from tests.providers.fake_gcp import GoogleAuth
from tests.providers.fake_http import ApiError, Call, FakeApi, Reply

__all__ = ["FakeGCS"]

_B = r"/storage/v1/b"
_UPLOAD = r"/upload/storage/v1/b/(?P<bucket>[^/]+)/o"
_BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{1,61}[a-z0-9]$")
_IP = re.compile(r"^\d+\.\d+\.\d+\.\d+$")
_LABEL_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")
_CHUNK = 256 * 1024
_RANGE = re.compile(r"^bytes (?:(?P<first>\d+)-(?P<last>\d+)|\*)/(?P<total>\d+|\*)$")
_REASONS = {400: "invalid", 401: "required", 403: "forbidden", 404: "notFound", 409: "conflict"}


class FakeGCS(GoogleAuth, FakeApi):
    """Cloud Storage for one project, in memory."""

    reasons = _REASONS
    scopes = (
        *GoogleAuth.scopes,
        "https://www.googleapis.com/auth/devstorage.full_control",
        "https://www.googleapis.com/auth/devstorage.read_write",
    )

    def __init__(self, project: str, key_file: Path) -> None:
        super().__init__()
        self.project = project
        self.key_file = key_file
        self.issued = set()
        self.buckets: dict[str, dict[str, Any]] = {}
        self.objects: dict[str, dict[str, bytes]] = {}
        """bucket -> object name -> data."""
        self.foreign: set[str] = set()
        """Bucket names another project owns."""
        self.sessions: dict[str, dict[str, Any]] = {}
        """Resumable upload id -> {bucket, name, data}."""
        self.page_size = 1000
        self.denied = False
        """Answer every bucket call 403, as for an account without storage permissions."""
        self._ids = itertools.count(1)
        self.route("POST", r"/token", self.token)
        self.route("POST", _B, self._bucket_insert)
        self.route("GET", _B, self._bucket_list)
        self.route("GET", _B + r"/(?P<bucket>[^/]+)", self._bucket_get)
        self.route("DELETE", _B + r"/(?P<bucket>[^/]+)", self._bucket_delete)
        self.route("POST", _UPLOAD, self._object_insert)
        self.route("PUT", _UPLOAD, self._resumable_chunk)
        self.route("GET", _B + r"/(?P<bucket>[^/]+)/o", self._object_list)
        self.route("GET", _B + r"/(?P<bucket>[^/]+)/o/(?P<object>.+)", self._object_get)
        self.route("GET", r"/download" + _B + r"/(?P<bucket>[^/]+)/o/(?P<object>.+)", self._object_get)
        self.route("DELETE", _B + r"/(?P<bucket>[^/]+)/o/(?P<object>.+)", self._object_delete)

    def dispatch(self, call: Call) -> Reply:
        if call.path != "/token" and not self._authorized(call.headers.get("authorization", "")):
            self.violations.append(f"{call.method} {call.path} without a valid bearer token")
            return 401, self.error_body(ApiError(401, "required", "Anonymous caller does not have access."))
        return super().dispatch(call)

    def own(self, name: str, labels: dict[str, str] | None = None) -> None:
        """A bucket of the test's project made outside skyhop (by the user, say)."""
        self.buckets[name] = self._resource(name, labels or {}, "US")
        self.objects[name] = {}

    # -- buckets -------------------------------------------------------------------------------

    def _resource(self, name: str, labels: dict[str, str], location: str) -> dict[str, Any]:
        return {
            "kind": "storage#bucket",
            "id": name,
            "selfLink": f"{self.url}/storage/v1/b/{name}",
            "projectNumber": "4242",
            "name": name,
            "timeCreated": "2026-01-01T00:00:00.000Z",
            "updated": "2026-01-01T00:00:00.000Z",
            "metageneration": "1",
            "location": location.upper(),
            "locationType": "region" if "-" in location else "multi-region",
            "storageClass": "STANDARD",
            "etag": "CAE=",
            "labels": labels,
        }

    def _bucket(self, call: Call) -> dict[str, Any]:
        """The bucket the path names; 404 if there is none, 403 if it is another project's."""
        name = call.match["bucket"]
        if self.denied or name in self.foreign:
            raise ApiError(
                403,
                "forbidden",
                f"skyhop-test@{self.project}.iam.gserviceaccount.com does not have storage.buckets.get "
                f"access to the Google Cloud Storage bucket. Permission 'storage.buckets.get' denied on "
                f"resource (or it may not exist).",
            )
        if name not in self.buckets:
            raise ApiError(404, "notFound", "The specified bucket does not exist.")
        return self.buckets[name]

    def _check_bucket_name(self, name: str) -> None:
        # Cloud Storage's naming rules: 3-63 characters of lowercase letters, digits, -, _ and .,
        # starting and ending with a letter or digit, not an IP address, not starting with "goog".
        valid = bool(_BUCKET_NAME.match(name)) and not _IP.match(name) and not name.startswith("goog")
        if not valid:
            raise ApiError(400, "invalid", f"Invalid bucket name: '{name}'", violation=True)

    def _bucket_insert(self, call: Call) -> Reply:
        self.check(call.query.get("project") == self.project, f"project {call.query.get('project')!r}")
        body = call.body
        self.check(isinstance(body, dict), "bucket body is not a JSON object")
        name = str(body.get("name", ""))
        self._check_bucket_name(name)
        labels = body.get("labels") or {}
        self.check(len(labels) <= 64, "more than 64 labels")
        for key, value in labels.items():
            self.check(bool(_LABEL_KEY.match(key)), f"invalid label key {key!r}")
            self.check(isinstance(value, str) and bool(_LABEL_VALUE.match(value)), f"invalid label {value!r}")
        if self.denied:
            raise ApiError(
                403,
                "forbidden",
                f"skyhop-test@{self.project}.iam.gserviceaccount.com does not have storage.buckets.create "
                f"access to the Google Cloud project. Permission 'storage.buckets.create' denied.",
            )
        if name in self.foreign:
            raise ApiError(
                409,
                "conflict",
                "The requested bucket name is not available. The bucket namespace is shared by all users "
                "of the system. Please select a different name and try again.",
            )
        if name in self.buckets:
            raise ApiError(
                409,
                "conflict",
                "Your previous request to create the named bucket succeeded and you already own it.",
            )
        self.buckets[name] = self._resource(name, dict(labels), str(body.get("location") or "US"))
        self.objects[name] = {}
        return 200, self.buckets[name]

    def _bucket_get(self, call: Call) -> Reply:
        return 200, self._bucket(call)

    def _bucket_list(self, call: Call) -> Reply:
        self.check(call.query.get("project") == self.project, f"project {call.query.get('project')!r}")
        if self.denied:
            raise ApiError(403, "forbidden", "Permission 'storage.buckets.list' denied.")
        return 200, self._page("storage#buckets", [self.buckets[n] for n in sorted(self.buckets)], call)

    def _page(self, kind: str, items: list[dict[str, Any]], call: Call) -> dict[str, Any]:
        """One page of ``items`` per ``pageToken`` (an index) and ``maxResults``."""
        size = min(int(call.query.get("maxResults") or self.page_size), self.page_size)
        start = int(call.query.get("pageToken") or 0)
        page: dict[str, Any] = {"kind": kind, "items": items[start : start + size]}
        if start + size < len(items):
            page["nextPageToken"] = str(start + size)
        return page

    def _bucket_delete(self, call: Call) -> Reply:
        self._bucket(call)
        if self.objects[call.match["bucket"]]:
            raise ApiError(409, "conflict", "The bucket you tried to delete is not empty.")
        del self.buckets[call.match["bucket"]], self.objects[call.match["bucket"]]
        return 204, None

    # -- objects -------------------------------------------------------------------------------

    def _object(self, bucket: str, name: str) -> dict[str, Any]:
        data = self.objects[bucket][name]
        quoted = urllib.parse.quote(name, safe="")
        return {
            "kind": "storage#object",
            "id": f"{bucket}/{name}/1",
            "name": name,
            "bucket": bucket,
            "generation": "1",
            "metageneration": "1",
            "contentType": "application/octet-stream",
            "size": str(len(data)),
            "md5Hash": base64.b64encode(hashlib.md5(data).digest()).decode(),
            "crc32c": base64.b64encode(google_crc32c.value(data).to_bytes(4, "big")).decode(),
            "timeCreated": "2026-01-01T00:00:00.000Z",
            "updated": "2026-01-01T00:00:00.000Z",
            "storageClass": "STANDARD",
            "selfLink": f"{self.url}/storage/v1/b/{bucket}/o/{quoted}",
            "mediaLink": f"{self.url}/download/storage/v1/b/{bucket}/o/{quoted}?generation=1&alt=media",
        }

    def _check_object_name(self, name: str) -> None:
        # 1-1024 bytes of UTF-8, no carriage return or line feed, not "." or "..".
        valid = 0 < len(name.encode()) <= 1024 and not set(name) & {"\r", "\n"} and name not in (".", "..")
        self.check(valid, f"invalid object name {name!r}")

    def _store(self, bucket: str, name: str, data: bytes) -> Reply:
        self._check_object_name(name)
        self.objects[bucket][name] = data
        return 200, self._object(bucket, name)

    def _object_insert(self, call: Call) -> Reply:
        self._bucket(call)
        kind = call.query.get("uploadType")
        if kind == "multipart":
            metadata, data = self._multipart(call)
            return self._store(call.match["bucket"], str(metadata.get("name", "")), data)
        self.check(kind == "resumable", f"uploadType {kind!r} is not multipart or resumable")
        name = str((call.body or {}).get("name") or call.query.get("name") or "")
        self._check_object_name(name)
        upload_id = f"upload-{next(self._ids)}"
        self.sessions[upload_id] = {"bucket": call.match["bucket"], "name": name, "data": b""}
        location = f"{self.url}/upload/storage/v1/b/{call.match['bucket']}/o"
        return 200, None, {"Location": f"{location}?uploadType=resumable&upload_id={upload_id}"}

    def _multipart(self, call: Call) -> tuple[dict[str, Any], bytes]:
        """A ``multipart/related`` body: the object's JSON metadata, then its data."""
        content_type = call.headers.get("content-type", "")
        self.check(content_type.startswith("multipart/related"), f"Content-Type {content_type!r}")
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            f"Content-Type: {content_type}\r\n\r\n".encode() + call.raw
        )
        parts = list(message.iter_parts())
        self.check(len(parts) == 2, f"a multipart upload has 2 parts, not {len(parts)}")
        self.check(parts[0].get_content_type() == "application/json", "the first part is not JSON metadata")
        metadata = json.loads(parts[0].get_payload(decode=True) or b"{}")
        data = parts[1].get_payload(decode=True)
        assert isinstance(data, bytes)
        return metadata, data

    def _resumable_chunk(self, call: Call) -> Reply:
        session = self.sessions.get(call.query.get("upload_id", ""))
        if session is None:
            raise ApiError(404, "notFound", "No such upload session.", violation=True)
        found = _RANGE.match(call.headers.get("content-range", ""))
        self.check(found is not None, f"Content-Range {call.headers.get('content-range')!r}")
        assert found is not None
        received = len(session["data"])
        if found["first"] is not None:
            self.check(int(found["first"]) == received, f"chunk starts at {found['first']}, not {received}")
            self.check(int(found["last"]) - int(found["first"]) + 1 == len(call.raw), "chunk length")
        data = session["data"] + call.raw
        final = found["total"] != "*" and int(found["total"]) == len(data)
        self.check(
            final or len(call.raw) % _CHUNK == 0, f"a {len(call.raw)}-byte chunk is not 256 KiB-aligned"
        )
        self.check(found["total"] == "*" or int(found["total"]) >= len(data), "more bytes than the total")
        session["data"] = data
        if not final:
            return 308, None, {"Range": f"bytes=0-{len(data) - 1}"}
        del self.sessions[call.query["upload_id"]]
        return self._store(session["bucket"], session["name"], session["data"])

    def _object_list(self, call: Call) -> Reply:
        self._bucket(call)
        prefix, delimiter = call.query.get("prefix", ""), call.query.get("delimiter", "")
        names = sorted(n for n in self.objects[call.match["bucket"]] if n.startswith(prefix))
        if delimiter:
            # Names with the delimiter past the prefix are summarised as their "folder" prefixes.
            folders = {
                n[: n.index(delimiter, len(prefix)) + 1] for n in names if delimiter in n[len(prefix) :]
            }
            names = [n for n in names if delimiter not in n[len(prefix) :]]
        page = self._page("storage#objects", [self._object(call.match["bucket"], n) for n in names], call)
        if delimiter and folders:
            page["prefixes"] = sorted(folders)
        return 200, page

    def _named(self, call: Call) -> str:
        self._bucket(call)
        if call.match["object"] not in self.objects[call.match["bucket"]]:
            raise ApiError(404, "notFound", f"No such object: {call.match['bucket']}/{call.match['object']}")
        return call.match["object"]

    def _object_get(self, call: Call) -> Reply:
        name = self._named(call)
        if call.query.get("alt") == "media":
            return 200, self.objects[call.match["bucket"]][name]
        return 200, self._object(call.match["bucket"], name)

    def _object_delete(self, call: Call) -> Reply:
        del self.objects[call.match["bucket"]][self._named(call)]
        return 204, None
