"""The Kubernetes provider on fake clusters: failover off FailedScheduling, API writes, 2-node launch.

An embedded skyhop (its own Temporal dev server and worker) launches through the CLI on two fake
clusters (``tests/fakes/kubernetes``): ``a-small`` has one node with two A100s, ``b-big`` two such
nodes. A 2-node ``A100-80GB:2`` task tried on ``a-small`` first gets one pod unschedulable; the
figure is the time from that pod's FailedScheduling event to the first pod of the next attempt on
``b-big`` (both as the fakes' stores recorded their writes). Then a 2-node launch pinned to
``b-big`` (wall time of ``skyhop launch``, job included) and its ``down``: the API writes those made,
per pod.

    python benchmarks/kubernetes_launch.py [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # for tests.fakes and tests.helpers

from tests.fakes.kubernetes import FakeKubernetes, NodeSpec, write_kubeconfig  # noqa: E402
from tests.fakes.kubernetes.fixture import A100, failover_gap  # noqa: E402
from tests.helpers import SKYHOP_CLI, embedded_skyhop  # noqa: E402

VERBOSE = False
_TASK = ["--infra", "k8s", "--gpus", "A100-80GB:2", "--num-nodes", "2", "echo rank $SKYHOP_NODE_RANK"]


def _cli(env: dict[str, str], *args: str) -> float:
    started = time.monotonic()
    done = subprocess.run([SKYHOP_CLI, *args], env=env, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise SystemExit(f"skyhop {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    if VERBOSE:
        print(f"$ skyhop {' '.join(args)}\n{done.stdout}{done.stderr}", file=sys.stderr)
    return time.monotonic() - started


def _failover_gap(env: dict[str, str], small: FakeKubernetes, big: FakeKubernetes, cluster: str) -> float:
    """Seconds from FailedScheduling on ``small`` to the next attempt's first pod on ``big``."""
    _cli(env, "launch", "-y", "-c", cluster, *_TASK)
    _cli(env, "down", "-y", cluster)
    return failover_gap(small, big, cluster)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--verbose", action="store_true", help="print each command's output")
    args = parser.parse_args()
    global VERBOSE
    VERBOSE = args.verbose
    a100 = {"nvidia.com/gpu.product": A100}
    node = {"cpu": "8", "memory": "64Gi", "gpus": 2, "labels": a100}
    with tempfile.TemporaryDirectory(prefix="skyhop-k8s-bench-") as tmp:
        root = Path(tmp)
        small = FakeKubernetes(root / "a", [NodeSpec("a100-1", **node)], context="a-small")  # type: ignore[arg-type]
        big = FakeKubernetes(root / "b", [NodeSpec(f"a100-{i}", **node) for i in (1, 2)], context="b-big")  # type: ignore[arg-type]
        with small, big:
            kubeconfig = write_kubeconfig(root / "kubeconfig", [small, big])
            home = root / "home"
            (home / ".skyhop").mkdir(parents=True)
            settings = {"kubeconfig": str(kubeconfig), "allowed_contexts": ["a-small", "b-big"]}
            (home / ".skyhop" / "config.yaml").write_text(yaml.safe_dump({"kubernetes": settings}))
            with embedded_skyhop(home) as env:
                _cli(
                    env, "launch", "-y", "-c", "warm", "--infra", "k8s/b-big", "true"
                )  # server, worker, imports
                _cli(env, "down", "-y", "warm")
                gaps = [_failover_gap(env, small, big, f"fo{i}") for i in range(args.runs)]
                launches, writes = [], Counter[str]()
                for i in range(args.runs):
                    before = len(big.writes())
                    launches.append(
                        _cli(env, "launch", "-y", "-c", f"two{i}", *_TASK[:1], "k8s/b-big", *_TASK[2:])
                    )
                    _cli(env, "down", "-y", f"two{i}")
                    writes.update(
                        w.split("?")[0].replace(f"two{i}", "<cluster>") for w in big.writes()[before:]
                    )
    per_pod = sum(writes.values()) / (2 * args.runs)
    print(f"FailedScheduling -> next attempt's first pod: median {statistics.median(gaps):.2f} s "
          f"(runs: {', '.join(f'{g:.2f}' for g in gaps)})")  # fmt: skip
    print(f"API writes per pod (launch + down of a 2-node cluster): {per_pod:g}")
    for what, count in sorted(writes.items()):
        print(f"  {count / args.runs:g} x {what} per cluster")
    print(f"2-node launch (skyhop launch, job included): median {statistics.median(launches):.2f} s "
          f"(runs: {', '.join(f'{t:.2f}' for t in launches)})")  # fmt: skip


if __name__ == "__main__":
    main()
