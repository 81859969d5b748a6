"""A local Azure Blob service for contract tests of the ``azure`` bucket store, checking every request.

It serves one storage account, addressed path-style as the storage emulator is
(``http://127.0.0.1:PORT/<account>/<container>/<blob>``), with the REST API's documented shapes,
as the SDK and rclone call them: containers (Create with ``x-ms-meta-*``, Get Properties, Get/Set
Metadata, Delete, List with ``include=metadata`` and markers) and blobs (Put Blob, Put Block and
Put Block List as the SDK sends a large file, List Blobs with ``delimiter``, Get Blob with
ranges, Get Blob Properties, Delete Blob). Every request must be signed with the account's Shared
Key (the signature is recomputed as the service does; with ``x-ms-version`` and ``x-ms-date``) or
carry an account SAS of it that allows the operation. Names and metadata are checked against the
service's rules; errors are its XML ``<Error>`` bodies with ``x-ms-error-code``. A deleted
container's name stays "being deleted" for ``deleting_for`` creates, as on Azure.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import re
import urllib.parse
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from xml.etree import ElementTree as ET

from tests.providers.fake_http import ApiError, Call, FakeApi, Reply

__all__ = ["FakeBlobService"]

_CONTAINER = re.compile(r"^(?!.*--)[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$")
_METADATA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
"""Metadata names are C# identifiers."""
_SIGNED = [
    "content-encoding",
    "content-language",
    "content-length",
    "content-md5",
    "content-type",
    "date",
    "if-modified-since",
    "if-match",
    "if-none-match",
    "if-unmodified-since",
    "range",
]
_LAST_MODIFIED = "Thu, 01 Jan 2026 00:00:00 GMT"
_MESSAGES = {
    "ContainerNotFound": "The specified container does not exist.",
    "ContainerAlreadyExists": "The specified container already exists.",
    "ContainerBeingDeleted": "The specified container is being deleted. Try operation later.",
    "BlobNotFound": "The specified blob does not exist.",
    "AuthenticationFailed": "Server failed to authenticate the request. Make sure the value of Authorization "
    "header is formed correctly including the signature.",
    "AuthorizationPermissionMismatch": "This request is not authorized to perform this operation using this "
    "permission.",
}


class FakeBlobService(FakeApi):
    """One storage account's Blob service, in memory."""

    def __init__(self, account: str) -> None:
        super().__init__()
        self.account = account
        self.key = base64.b64encode(hashlib.sha256(account.encode()).digest() * 2).decode()
        self.containers: dict[str, dict[str, str]] = {}
        """container -> metadata."""
        self.blobs: dict[str, dict[str, bytes]] = {}
        self.blocks: dict[tuple[str, str], dict[str, bytes]] = {}
        """(container, blob) -> uncommitted block id -> data."""
        self.deleting: dict[str, int] = {}
        """Deleted container -> creates still refused with ContainerBeingDeleted."""
        self.deleting_for = 0
        self.page_size = 5000
        self.read_only = False
        """Answer writes 403 AuthorizationPermissionMismatch, as for a key or role that may only read."""
        self._etags = itertools.count(1)
        a = rf"/{account}"
        self.route("GET", a + r"/?", self._list_containers)
        self.route("PUT", a + r"/(?P<container>[^/]+)", self._container_put)
        self.route("GET", a + r"/(?P<container>[^/]+)", self._container_get)
        self.route("DELETE", a + r"/(?P<container>[^/]+)", self._container_delete)
        self.route("PUT", a + r"/(?P<container>[^/]+)/(?P<blob>.+)", self._blob_put)
        self.route("GET", a + r"/(?P<container>[^/]+)/(?P<blob>.+)", self._blob_get)
        self.route("HEAD", a + r"/(?P<container>[^/]+)/(?P<blob>.+)", self._blob_head)
        self.route("DELETE", a + r"/(?P<container>[^/]+)/(?P<blob>.+)", self._blob_delete)

    @property
    def connection_string(self) -> str:
        return (
            f"DefaultEndpointsProtocol=http;AccountName={self.account};AccountKey={self.key};"
            f"BlobEndpoint={self.url}/{self.account};"
        )

    def error_body(self, error: ApiError) -> Any:
        root = ET.Element("Error")
        ET.SubElement(root, "Code").text = error.code
        ET.SubElement(
            root, "Message"
        ).text = f"{error.message}\nRequestId:00000000-0000\nTime:{_LAST_MODIFIED}"
        return b'<?xml version="1.0" encoding="utf-8"?>' + ET.tostring(root)

    def error_reply(self, error: ApiError) -> Reply:
        headers = {"Content-Type": "application/xml", "x-ms-error-code": error.code}
        return error.status, self.error_body(error), headers

    def dispatch(self, call: Call) -> Reply:
        problem = self._unsigned(call)
        if problem:
            self.violations.append(f"{call.method} {call.path}: {problem}")
            return self.error_reply(ApiError(403, "AuthenticationFailed", _MESSAGES["AuthenticationFailed"]))
        if self.read_only and call.method in ("PUT", "DELETE"):
            denied = "AuthorizationPermissionMismatch"
            return self.error_reply(ApiError(403, denied, _MESSAGES[denied]))
        return super().dispatch(call)

    # -- Shared Key ----------------------------------------------------------------------------

    def _unsigned(self, call: Call) -> str | None:
        """What is wrong with the request's Shared Key signature or account SAS, or None when it is
        the account's."""
        headers = call.headers
        if not headers.get("x-ms-version"):
            return "no x-ms-version"
        if "sig" in call.query:
            return self._sas_refusal(call)
        try:
            parsedate_to_datetime(headers.get("x-ms-date", ""))
        except (TypeError, ValueError):
            return f"x-ms-date {headers.get('x-ms-date')!r} is not an HTTP date"
        scheme, _, credential = headers.get("authorization", "").partition(" ")
        account, _, signature = credential.partition(":")
        if scheme != "SharedKey" or account != self.account:
            return f"Authorization {headers.get('authorization')!r} is not SharedKey {self.account}:..."
        expected = base64.b64encode(
            hmac.new(base64.b64decode(self.key), self._string_to_sign(call).encode(), hashlib.sha256).digest()
        ).decode()
        return None if hmac.compare_digest(signature, expected) else "the Shared Key signature does not match"

    def _sas_refusal(self, call: Call) -> str | None:
        """What an account SAS does not allow of this request (its signature, expiry, service,
        resource types and permissions), or None."""
        query = call.query
        fields = ["sp", "ss", "srt", "st", "se", "sip", "spr", "sv", "ses"]
        # The service reads the times as dates; rclone (Go's SDK) sends them lowercased.
        signed = {
            name: query.get(name, "").upper() if name in ("st", "se") else query.get(name, "")
            for name in fields
        }
        string_to_sign = self.account + "\n" + "".join(f"{signed[name]}\n" for name in fields)
        expected = base64.b64encode(
            hmac.new(base64.b64decode(self.key), string_to_sign.encode(), hashlib.sha256).digest()
        ).decode()
        if not hmac.compare_digest(query["sig"], expected):
            return "the SAS signature does not match"
        try:
            expiry = datetime.fromisoformat(signed["se"].replace("Z", "+00:00"))
        except ValueError:
            return f"SAS expiry {signed['se']!r} is not a UTC time"
        if expiry <= datetime.now(UTC):
            return "the SAS has expired"
        if "b" not in signed["ss"] or not set("sco") <= set(signed["srt"]):
            return f"the SAS covers services {signed['ss']!r} and resource types {signed['srt']!r}"
        listing = call.method == "GET" and query.get("comp") == "list"
        needed = {"GET": "l" if listing else "r", "HEAD": "r", "PUT": "w", "DELETE": "d"}[call.method]
        return None if needed in signed["sp"] else f"the SAS lacks permission {needed!r}"

    def _string_to_sign(self, call: Call) -> str:
        """The Blob service's string-to-sign (versions 2015-02-21 on: a zero Content-Length is empty)."""
        headers = dict(call.headers)
        if headers.get("content-length") == "0":
            headers["content-length"] = ""
        standard = "".join(f"{headers.get(name, '')}\n" for name in _SIGNED)
        # The service orders x-ms- headers by its collation, in which a hyphen counts for nothing.
        ms = sorted((n, v) for n, v in headers.items() if n.startswith("x-ms-"))
        ms.sort(key=lambda item: item[0].replace("-", ""))
        canonical_headers = "".join(f"{name}:{value.strip()}\n" for name, value in ms)
        path, _, query = call.target.partition("?")
        resource = f"/{self.account}{path}"
        params: dict[str, list[str]] = {}
        for name, value in urllib.parse.parse_qsl(query, keep_blank_values=True):
            params.setdefault(name.lower(), []).append(value)
        resource += "".join(f"\n{name}:{','.join(sorted(params[name]))}" for name in sorted(params))
        return f"{call.method}\n{standard}{canonical_headers}{resource}"

    # -- containers ----------------------------------------------------------------------------

    def _xml(self, root: ET.Element, status: int = 200) -> Reply:
        body = b'<?xml version="1.0" encoding="utf-8"?>' + ET.tostring(root)
        return status, body, {"Content-Type": "application/xml"}

    def _properties_headers(self, container: str) -> dict[str, str]:
        return {
            "ETag": f'"0x8DC{next(self._etags):012X}"',
            "Last-Modified": _LAST_MODIFIED,
            "x-ms-lease-status": "unlocked",
            "x-ms-lease-state": "available",
            "x-ms-has-immutability-policy": "false",
            "x-ms-has-legal-hold": "false",
            **{f"x-ms-meta-{name}": value for name, value in self.containers[container].items()},
        }

    def _container(self, call: Call) -> str:
        name = call.match["container"]
        if name not in self.containers:
            raise ApiError(404, "ContainerNotFound", _MESSAGES["ContainerNotFound"])
        return name

    def _metadata(self, call: Call) -> dict[str, str]:
        metadata = {n[len("x-ms-meta-") :]: v for n, v in call.headers.items() if n.startswith("x-ms-meta-")}
        for name in metadata:
            if not _METADATA_NAME.match(name):
                raise ApiError(400, "InvalidMetadata", f"metadata name {name!r}", violation=True)
        return metadata

    def _container_put(self, call: Call) -> Reply:
        self.check(
            call.query.get("restype") == "container", f"PUT of a container without restype: {call.query}"
        )
        name = call.match["container"]
        if call.query.get("comp") == "metadata":
            self.containers[self._container(call)] = self._metadata(call)
            return 200, None, {"ETag": '"0x8DC1"', "Last-Modified": _LAST_MODIFIED}
        if not _CONTAINER.match(name):
            raise ApiError(
                400,
                "InvalidResourceName",
                "The specifed resource name contains invalid characters.",
                violation=True,
            )
        metadata = self._metadata(call)
        if self.deleting.get(name):
            self.deleting[name] -= 1
            raise ApiError(409, "ContainerBeingDeleted", _MESSAGES["ContainerBeingDeleted"])
        if name in self.containers:
            raise ApiError(409, "ContainerAlreadyExists", _MESSAGES["ContainerAlreadyExists"])
        self.containers[name], self.blobs[name] = metadata, {}
        return 201, None, {"ETag": '"0x8DC1"', "Last-Modified": _LAST_MODIFIED}

    def _container_get(self, call: Call) -> Reply:
        self.check(
            call.query.get("restype") == "container", f"GET of a container without restype: {call.query}"
        )
        name = self._container(call)
        if call.query.get("comp") == "list":
            return self._list_blobs(call, name)
        self.check(call.query.get("comp") in (None, "metadata"), f"comp {call.query.get('comp')!r}")
        return 200, None, self._properties_headers(name)

    def _container_delete(self, call: Call) -> Reply:
        self.check(call.query.get("restype") == "container", "DELETE of a container without restype")
        name = self._container(call)
        del self.containers[name], self.blobs[name]
        self.deleting[name] = self.deleting_for
        return 202, None

    def _page(self, call: Call, names: list[str]) -> tuple[list[str], str]:
        size = min(int(call.query.get("maxresults") or self.page_size), self.page_size)
        marker = call.query.get("marker", "")
        after = [n for n in names if n >= marker]
        return after[:size], after[size] if len(after) > size else ""

    def _enumeration(self, call: Call, names: list[str], **attrs: str) -> tuple[ET.Element, list[str]]:
        page, next_marker = self._page(call, names)
        root = ET.Element("EnumerationResults", ServiceEndpoint=f"{self.url}/{self.account}/", **attrs)
        for tag in ("Prefix", "Marker", "MaxResults"):
            if call.query.get(tag.lower()):
                ET.SubElement(root, tag).text = call.query[tag.lower()]
        ET.SubElement(root, "NextMarker").text = next_marker
        return root, page

    def _list_containers(self, call: Call) -> Reply:
        self.check(call.query.get("comp") == "list", f"account GET without comp=list: {call.query}")
        prefix = call.query.get("prefix", "")
        root, page = self._enumeration(call, sorted(n for n in self.containers if n.startswith(prefix)))
        containers = ET.Element("Containers")
        root.insert(len(root) - 1, containers)
        for name in page:
            item = ET.SubElement(containers, "Container")
            ET.SubElement(item, "Name").text = name
            properties = ET.SubElement(item, "Properties")
            for tag, value in [("Last-Modified", _LAST_MODIFIED), ("Etag", '"0x8DC1"')]:
                ET.SubElement(properties, tag).text = value
            for tag, value in [("LeaseStatus", "unlocked"), ("LeaseState", "available")]:
                ET.SubElement(properties, tag).text = value
            if "metadata" in call.query.get("include", "").split(","):
                metadata = ET.SubElement(item, "Metadata")
                for key, value in self.containers[name].items():
                    ET.SubElement(metadata, key).text = value
        return self._xml(root)

    # -- blobs ---------------------------------------------------------------------------------

    def _list_blobs(self, call: Call, container: str) -> Reply:
        prefix, delimiter = call.query.get("prefix", ""), call.query.get("delimiter", "")
        names = sorted(n for n in self.blobs[container] if n.startswith(prefix))
        if delimiter:
            # Names with the delimiter past the prefix are summarised as one BlobPrefix per "folder".
            cut = {n: n.find(delimiter, len(prefix)) for n in names}
            names = sorted({n[: cut[n] + len(delimiter)] if cut[n] >= 0 else n for n in names})
        root, page = self._enumeration(call, names, ContainerName=container)
        blobs = ET.Element("Blobs")
        root.insert(len(root) - 1, blobs)
        for name in page:
            if name not in self.blobs[container]:
                ET.SubElement(ET.SubElement(blobs, "BlobPrefix"), "Name").text = name
                continue
            item = ET.SubElement(blobs, "Blob")
            ET.SubElement(item, "Name").text = name
            properties = ET.SubElement(item, "Properties")
            for tag, value in [
                ("Creation-Time", _LAST_MODIFIED),
                ("Last-Modified", _LAST_MODIFIED),
                ("Etag", '"0x8DC1"'),
                ("Content-Length", str(len(self.blobs[container][name]))),
                ("Content-Type", "application/octet-stream"),
                ("BlobType", "BlockBlob"),
                ("LeaseStatus", "unlocked"),
                ("LeaseState", "available"),
            ]:
                ET.SubElement(properties, tag).text = value
        return self._xml(root)

    def _blob_name(self, call: Call) -> tuple[str, str]:
        container = self._container(call)
        name = call.match["blob"]
        self.check(0 < len(name) <= 1024 and name.count("/") < 254, f"invalid blob name {name!r}")
        return container, name

    def _blob_put(self, call: Call) -> Reply:
        container, name = self._blob_name(call)
        self.check("content-length" in call.headers, "a PUT without Content-Length (411 Length Required)")
        written = {"ETag": f'"0x8DC{next(self._etags):012X}"', "Last-Modified": _LAST_MODIFIED}
        comp = call.query.get("comp")
        if comp == "block":
            block_id = call.query.get("blockid", "")
            self.check(
                _is_base64(block_id) and len(base64.b64decode(block_id)) <= 64, f"blockid {block_id!r}"
            )
            staged = self.blocks.setdefault((container, name), {})
            self.check(
                all(len(other) == len(block_id) for other in staged), "block ids of a blob differ in length"
            )
            staged[block_id] = call.raw
            return 201, None, written
        if comp == "blocklist":
            staged = self.blocks.pop((container, name), {})
            ids = [element.text or "" for element in ET.fromstring(call.raw)]
            self.check(all(block in staged for block in ids), "the block list names a block never put")
            self.blobs[container][name] = b"".join(staged[block] for block in ids)
            return 201, None, written
        self.check(comp is None, f"comp {comp!r}")
        self.check(
            call.headers.get("x-ms-blob-type") == "BlockBlob", "Put Blob without x-ms-blob-type BlockBlob"
        )
        self.blobs[container][name] = call.raw
        return (
            201,
            None,
            {**written, "Content-MD5": base64.b64encode(hashlib.md5(call.raw).digest()).decode()},
        )

    def _blob(self, call: Call) -> tuple[str, str]:
        container, name = self._blob_name(call)
        if name not in self.blobs[container]:
            raise ApiError(404, "BlobNotFound", _MESSAGES["BlobNotFound"])
        return container, name

    def _blob_headers(self, container: str, name: str) -> dict[str, str]:
        return {
            "Content-Type": "application/octet-stream",
            "ETag": '"0x8DC1"',
            "Last-Modified": _LAST_MODIFIED,
            "x-ms-blob-type": "BlockBlob",
            "x-ms-creation-time": _LAST_MODIFIED,
        }

    def _blob_head(self, call: Call) -> Reply:
        """Get Blob Properties."""
        container, name = self._blob(call)
        return (
            200,
            None,
            {**self._blob_headers(container, name), "Content-Length": str(len(self.blobs[container][name]))},
        )

    def _blob_get(self, call: Call) -> Reply:
        container, name = self._blob(call)
        data = self.blobs[container][name]
        headers = self._blob_headers(container, name)
        wanted = re.fullmatch(
            r"bytes=(\d+)-(\d*)", call.headers.get("x-ms-range") or call.headers.get("range", "")
        )
        if wanted is None:
            return 200, data, headers
        first = int(wanted[1])
        last = min(int(wanted[2] or len(data) - 1), len(data) - 1)
        headers["Content-Range"] = f"bytes {first}-{last}/{len(data)}"
        return 206, data[first : last + 1], headers

    def _blob_delete(self, call: Call) -> Reply:
        container, name = self._blob(call)
        del self.blobs[container][name]
        return 202, None


def _is_base64(text: str) -> bool:
    try:
        return base64.b64encode(base64.b64decode(text, validate=True)).decode() == text
    except ValueError:
        return False
