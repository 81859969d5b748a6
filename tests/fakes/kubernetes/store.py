"""The API server's storage: objects with ``metadata.uid`` and a cluster-wide ``resourceVersion``, and the
change history that ``?watch=true`` replays from a resourceVersion (410 ``Expired`` once compacted).

Every write bumps the one counter, like etcd's revision: a list's ``metadata.resourceVersion`` is the
revision it saw, and a watch from it sees every later change exactly once.
"""

from __future__ import annotations

import copy
import random
import re
import string
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.kubernetes.resources import RESOURCES
from tests.fakes.kubernetes.selectors import Selector
from tests.fakes.kubernetes.status import StatusError, not_found, timestamp

__all__ = ["Change", "Store", "WatchEvent"]

Obj = dict[str, Any]
WatchEvent = tuple[str, Obj]
"""(``ADDED``/``MODIFIED``/``DELETED``/``ERROR``, object)."""

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


@dataclass(frozen=True)
class Change:
    revision: int
    resource: str
    namespace: str
    old: Obj | None
    new: Obj | None
    """None when the object was deleted (``old`` then carries the deletion's resourceVersion)."""
    at: float = field(default_factory=time.monotonic)
    """When it was written (``time.monotonic``): tests time what happened across fakes from it."""


def _invalid(kind: str, name: str, field: str, value: str, why: str) -> StatusError:
    message = f'{kind} "{name}" is invalid: {field}: Invalid value: "{value}": {why}'
    cause = {"reason": "FieldValueInvalid", "message": f'Invalid value: "{value}": {why}', "field": field}
    return StatusError(422, "Invalid", message, {"name": name, "kind": kind, "causes": [cause]})


def _check_name(resource: str, name: str) -> None:
    kind = RESOURCES[resource].kind
    if resource == "services":
        if len(name) > 63 or not _LABEL_1035.match(name):
            why = (
                "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
                "alphabetic character, and end with an alphanumeric character"
            )
            raise _invalid(kind, name, "metadata.name", name, why)
    elif len(name) > 253 or not _SUBDOMAIN.match(name):
        why = (
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
            "and must start and end with an alphanumeric character"
        )
        raise _invalid(kind, name, "metadata.name", name, why)


class Store:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self._objects: dict[str, dict[tuple[str, str], Obj]] = {r: {} for r in RESOURCES}
        self._revision = 1
        self._history: list[Change] = []
        self._oldest = 1
        """Changes at or before this revision were compacted away."""

    @property
    def revision(self) -> int:
        return self._revision

    def _record(self, resource: str, namespace: str, old: Obj | None, new: Obj | None) -> int:
        self._revision += 1
        target = new if new is not None else old
        assert target is not None
        target["metadata"]["resourceVersion"] = str(self._revision)
        self._history.append(
            Change(self._revision, resource, namespace, copy.deepcopy(old), copy.deepcopy(new))
        )
        self.changed.notify_all()
        return self._revision

    def created_at(self, resource: str, where: Callable[[Obj], bool]) -> float | None:
        """When the first object of ``resource`` that ``where`` accepts was created (None: none was,
        or the history was compacted since)."""
        with self.lock:
            created = (c for c in self._history if c.resource == resource and c.old is None)
            return next((c.at for c in created if c.new is not None and where(c.new)), None)

    def compact(self) -> None:
        """Forget the history, as etcd compaction does: watches from older versions get 410 Expired."""
        with self.lock:
            self._history.clear()
            self._oldest = self._revision

    def create(self, resource: str, namespace: str, obj: Obj) -> Obj:
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        with self.lock:
            if not meta.get("name") and meta.get("generateName"):
                suffix = "".join(random.choices(string.ascii_lowercase + string.digits, k=5))
                meta["name"] = meta["generateName"] + suffix
            name = meta.get("name") or ""
            kind = RESOURCES[resource].kind
            if not name:
                raise _invalid(kind, "", "metadata.name", "", "name or generateName is required")
            _check_name(resource, name)
            if RESOURCES[resource].namespaced:
                if ("", namespace) not in self._objects["namespaces"]:
                    raise not_found("namespaces", namespace)
                meta["namespace"] = namespace
            if (namespace, name) in self._objects[resource]:
                raise StatusError(
                    409,
                    "AlreadyExists",
                    f'{resource} "{name}" already exists',
                    {"name": name, "kind": resource},
                )
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = timestamp()
            obj.setdefault("apiVersion", "v1")
            obj["kind"] = kind
            self._objects[resource][(namespace, name)] = obj
            self._record(resource, namespace, None, obj)
            return copy.deepcopy(obj)

    def find(self, resource: str, namespace: str, name: str) -> Obj | None:
        with self.lock:
            found = self._objects[resource].get((namespace, name))
            return copy.deepcopy(found) if found is not None else None

    def get(self, resource: str, namespace: str, name: str) -> Obj:
        found = self.find(resource, namespace, name)
        if found is None:
            raise not_found(resource, name)
        return found

    def list(
        self, resource: str, namespace: str | None = None, selector: Selector | None = None
    ) -> tuple[list[Obj], int]:
        """Matching objects (``namespace`` None: every namespace) sorted by namespace and name, and the
        revision they were read at."""
        with self.lock:
            items = [
                copy.deepcopy(obj)
                for (ns, _), obj in sorted(self._objects[resource].items())
                if (namespace is None or ns == namespace) and (selector is None or selector(obj))
            ]
            return items, self._revision

    def update(self, resource: str, namespace: str, name: str, mutate: Callable[[Obj], None]) -> Obj:
        """Apply ``mutate`` atomically; a write only when it changed something (as the API skips no-ops)."""
        with self.lock:
            current = self._objects[resource].get((namespace, name))
            if current is None:
                raise not_found(resource, name)
            changed = copy.deepcopy(current)
            mutate(changed)
            if changed != current:
                self._objects[resource][(namespace, name)] = changed
                self._record(resource, namespace, current, changed)
            return copy.deepcopy(changed)

    def replace(self, resource: str, namespace: str, name: str, obj: Obj) -> Obj:
        """PUT: the whole object, refused with 409 Conflict when its resourceVersion is stale."""
        with self.lock:
            current = self.get(resource, namespace, name)
            sent = (obj.get("metadata") or {}).get("resourceVersion")
            if sent and sent != current["metadata"]["resourceVersion"]:
                message = (
                    f'Operation cannot be fulfilled on {resource} "{name}": the object has been modified; '
                    "please apply your changes to the latest version and try again"
                )
                raise StatusError(409, "Conflict", message, {"name": name, "kind": resource})

            def put(target: Obj) -> None:
                kept = {
                    k: target["metadata"][k]
                    for k in ("uid", "creationTimestamp", "namespace", "name")
                    if k in target["metadata"]
                }
                target.clear()
                target.update(copy.deepcopy(obj))
                target.setdefault("metadata", {}).update(kept)

            return self.update(resource, namespace, name, put)

    def remove(self, resource: str, namespace: str, name: str) -> Obj:
        with self.lock:
            current = self._objects[resource].pop((namespace, name), None)
            if current is None:
                raise not_found(resource, name)
            self._record(resource, namespace, current, None)
            return copy.deepcopy(current)

    def watch(
        self,
        resource: str,
        namespace: str | None,
        selector: Selector,
        since: str,
        stopped: Callable[[], bool],
        deadline: float,
    ) -> Iterator[WatchEvent | None]:
        """Events after revision ``since`` (empty or ``0``: ADDED for every current object first).

        Yields None about twice a second while idle, so the caller can notice a client that left.
        """
        with self.lock:
            if since in ("", "0"):
                items, cursor = self.list(resource, namespace, selector)
                initial: list[WatchEvent] = [("ADDED", item) for item in items]
            else:
                try:
                    cursor = int(since)
                except ValueError:
                    raise StatusError(400, "BadRequest", f'invalid resource version "{since}"') from None
                initial = []
                if cursor < self._oldest:
                    message = f"too old resource version: {cursor} ({self._oldest})"
                    yield ("ERROR", StatusError(410, "Expired", message).body)
                    return
        yield from initial
        while not stopped() and time.monotonic() < deadline:
            with self.lock:
                pending = [c for c in self._history if c.revision > cursor]
                if not pending:
                    self.changed.wait(min(0.5, max(0.0, deadline - time.monotonic())))
                    pending = [c for c in self._history if c.revision > cursor]
            if not pending:
                yield None
                continue
            cursor = pending[-1].revision
            for change in pending:
                if change.resource == resource and namespace in (None, change.namespace):
                    event = _event(change, selector)
                    if event is not None:
                        yield event


def _event(change: Change, selector: Selector) -> WatchEvent | None:
    """A change as a watcher with ``selector`` sees it: an object leaving the selection is DELETED."""
    was = change.old is not None and selector(change.old)
    now = change.new is not None and selector(change.new)
    if change.new is not None and now:
        return ("MODIFIED" if was else "ADDED", change.new)
    if was and change.old is not None:
        return ("DELETED", change.new if change.new is not None else change.old)
    return None
