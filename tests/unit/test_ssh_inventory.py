"""The rules ``SSHPoolsWorkflow`` applies (``providers.ssh.inventory.Inventory``), without Temporal."""

from __future__ import annotations

import pytest

from skyhop.providers.errors import CapacityError
from skyhop.providers.ssh.inventory import Host, HostFacts, Inventory, identity_digest
from skyhop.providers.ssh.pools import HostSpec, PoolsError

KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nsecret\n-----END OPENSSH PRIVATE KEY-----\n"


def _host(pool: str, n: int, *, gpus: float = 0, answered: bool = True, key: str | None = KEY) -> Host:
    spec = HostSpec(
        pool=pool, address=f"10.0.0.{n}", user="root", identity_file="/laptop/id" if key else None
    )
    facts = HostFacts(
        hostname=f"h{n}",
        home="/root",
        cpus=4,
        memory_gib=8,
        accelerators={"A100": gpus} if gpus else {},
        rsync=True,
    )
    return Host(
        spec=spec,
        facts=facts if answered else None,
        error=None if answered else "connection refused",
        identity=identity_digest(key) if key else None,
    )


def _lab(*hosts: Host) -> Inventory:
    inventory = Inventory()
    inventory.register({"lab": list(hosts)}, {identity_digest(KEY): KEY})
    return inventory


PLAIN = "4CPU--8GB"


def test_an_allocation_is_idempotent_per_cluster_and_rank() -> None:
    inventory = _lab(*(_host("lab", n) for n in range(3)))
    first = inventory.allocate("a", "lab", PLAIN, 1)
    assert inventory.allocate("a", "lab", PLAIN, 1) == first  # a retried provision
    grown = inventory.allocate("a", "lab", PLAIN, 2)  # rank 0 kept, rank 1 added
    assert grown[0] == first[0] and grown[1] != first[0]
    assert inventory.held_by("a") == dict(enumerate(grown))


def test_the_last_host_goes_to_one_cluster_and_the_other_learns_who_holds_it() -> None:
    inventory = _lab(_host("lab", 0), _host("lab", 1, answered=False), _host("lab", 2, gpus=2))
    inventory.allocate("a", "lab", PLAIN, 1)
    with pytest.raises(
        CapacityError, match=r"0 free host\(s\) of type 4CPU--8GB, 1 needed \(others are held by: a\)"
    ):
        inventory.allocate("b", "lab", PLAIN, 1)
    assert inventory.held_by("b") == {}
    with pytest.raises(CapacityError) as missing:
        inventory.allocate("b", "nowhere", PLAIN, 1)
    assert missing.value.code == "PoolNotFound"


def test_a_held_host_is_never_dropped_and_a_refusal_changes_nothing() -> None:
    inventory = _lab(_host("lab", 0), _host("lab", 1))
    inventory.allocate("a", "lab", PLAIN, 1)
    held = inventory.held_by("a")[0].spec
    before = inventory.model_copy(deep=True)
    with pytest.raises(
        PoolsError, match=f"host {held.address}:22 is held by cluster 'a'; take it down first"
    ):
        inventory.register({"lab": [h for h in inventory.pools["lab"] if h.spec != held]}, {})
    with pytest.raises(PoolsError, match="held by cluster 'a'"):
        inventory.remove(["lab"])
    with pytest.raises(PoolsError, match="no ssh pool named 'x'; registered pools: lab"):
        inventory.remove(["x"])
    assert inventory == before
    inventory.release("a")
    inventory.release("a")  # idempotent
    inventory.remove(["lab"])
    assert inventory == Inventory()  # its key went with it


def test_keys_are_kept_while_a_host_uses_them() -> None:
    other = "another key\n"
    inventory = _lab(_host("lab", 0))
    inventory.register({"gpu": [_host("gpu", 1, key=other)]}, {identity_digest(other): other})
    assert set(inventory.identities) == {identity_digest(KEY), identity_digest(other)}
    inventory.register({"gpu": [_host("gpu", 1, key=None)]}, {})
    assert set(inventory.identities) == {identity_digest(KEY)}
