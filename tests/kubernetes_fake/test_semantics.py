"""The fake's API semantics without processes: quantities, selectors, resourceVersions, watch, conflicts."""

from __future__ import annotations

import time
from fractions import Fraction

import pytest

from tests.fakes.kubernetes.quantity import InvalidQuantity, parse_quantity
from tests.fakes.kubernetes.selectors import Selector, field_selector, label_selector
from tests.fakes.kubernetes.status import StatusError
from tests.fakes.kubernetes.store import Store, WatchEvent


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", Fraction(1, 2)),
        ("2Gi", 2 * 2**30),
        ("1e3", 1000),
        ("1.5", Fraction(3, 2)),
        ("100M", 10**8),
        ("8", 8),
    ],
)
def test_quantities(text: str, value: Fraction) -> None:
    assert parse_quantity(text) == value


def test_a_bad_quantity_is_refused() -> None:
    with pytest.raises(InvalidQuantity):
        parse_quantity("2 GB")


def _labelled(**labels: str) -> dict[str, object]:
    return {"metadata": {"labels": labels}}


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        ("app=web", True),
        ("app==web,tier!=db", True),
        ("app in (api, web)", True),
        ("app notin (web)", False),
        ("tier", False),
        ("!tier", True),
        ("app,!tier", True),
        ("tier!=db", True),  # a missing key is "not db"
        ("", True),
    ],
)
def test_label_selectors(selector: str, matches: bool) -> None:
    assert label_selector(selector)(_labelled(app="web")) is matches


def test_selector_errors_are_bad_requests() -> None:
    with pytest.raises(StatusError) as bad_label:
        label_selector("app in web")
    with pytest.raises(StatusError) as bad_field:
        field_selector("pods", "spec.containers=x")
    assert bad_label.value.code == bad_field.value.code == 400
    assert bad_field.value.body["message"] == "field label not supported: spec.containers"


def _store() -> Store:
    store = Store()
    store.create("namespaces", "", {"metadata": {"name": "default"}})
    return store


def _pod(name: str, phase: str) -> dict[str, object]:
    return {"metadata": {"name": name}, "spec": {}, "status": {"phase": phase}}


def test_versions_grow_and_a_stale_write_conflicts() -> None:
    store = _store()
    made = store.create("pods", "default", _pod("a", "Pending"))
    later = store.update("pods", "default", "a", lambda p: p["status"].update(phase="Running"))
    assert int(later["metadata"]["resourceVersion"]) > int(made["metadata"]["resourceVersion"])
    assert later["metadata"]["uid"] == made["metadata"]["uid"]
    with pytest.raises(StatusError) as stale:
        store.replace("pods", "default", "a", made)
    assert (stale.value.code, stale.value.body["reason"]) == (409, "Conflict")
    with pytest.raises(StatusError) as twice:
        store.create("pods", "default", _pod("a", "Pending"))
    assert twice.value.body["reason"] == "AlreadyExists"


def test_a_watch_sees_objects_enter_and_leave_its_selector() -> None:
    store = _store()
    _, since = store.list("pods")
    store.create("pods", "default", _pod("a", "Pending"))
    store.update("pods", "default", "a", lambda p: p["status"].update(phase="Running"))
    store.update("pods", "default", "a", lambda p: p["status"].update(phase="Succeeded"))
    store.remove("pods", "default", "a")
    running = field_selector("pods", "status.phase=Running")

    def watch(selector: Selector, namespace: str | None = None) -> list[WatchEvent]:
        """What a watch from ``since`` sees in its first half second."""
        deadline = time.monotonic() + 0.5
        return [e for e in store.watch("pods", namespace, selector, str(since), lambda: False, deadline) if e]

    events = watch(running, "default")
    assert [(kind, obj["status"]["phase"]) for kind, obj in events] == [
        ("ADDED", "Running"),
        ("DELETED", "Succeeded"),
    ]
    assert [kind for kind, _ in watch(lambda o: True)] == ["ADDED", "MODIFIED", "MODIFIED", "DELETED"]
    store.compact()
    assert [(kind, obj["code"]) for kind, obj in watch(lambda o: True)] == [("ERROR", 410)]
