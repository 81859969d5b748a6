"""How many of SkyPilot's example task YAMLs skyhop plans, and why the others are refused.

Every YAML under DIR is planned the way ``skyhop launch --dryrun FILE`` plans it (the same
function, ``cli.planning.planned_dag`` then the optimizer, in this process for speed), from DIR as
the working directory (most examples' relative paths are relative to SkyPilot's repository root);
a file that names a local path missing there is planned again from its own folder, where the
examples that are run with ``cd`` into it find their files. The examples that use
``~/skypilot/...`` paths find the corpus there (a link from the temporary home), as for a user who
cloned SkyPilot into their home. A variable the file leaves null (``HF_TOKEN: null`` in ``envs`` or
``secrets``) is passed as ``--env``/``--secret NAME=example-value``, as its user must.

Users of the Kubernetes examples have a cluster: unless ``--no-kubernetes``, the files are planned
with a kubeconfig whose contexts (``gpu-cluster``, and ``coreweave``, which SkyPilot's CoreWeave
examples pin) are local fake clusters (``tests/fakes/kubernetes``), each of nodes of 224 vCPUs and
2 TiB (an 8-GPU server's size): a CPU node, nodes of 8 H100, H200, A100-80GB, A100, L40S, L4, of 4
T4 and 4 A10G (NVIDIA), of 8 MI300 and 4 MI210 (AMD); the volumes the files mount (``volumes:``)
are applied first, as those examples say to (``sky volumes apply``).

``--subprocess N`` also runs N of the files through the real CLI and checks it gives the same
verdict.

Verdicts: ``planned``; ``missing cloud`` (every place the task may run is a cloud skyhop has no
provider for: excepted from the target); ``missing local file`` (the file names a local path the
fetched corpus does not hold: a property of the corpus, not of the schema); ``refused``.

    python benchmarks/skypilot_examples.py DIR [--accepted SKY_ACCEPTED.txt] [--subprocess 8] [--top 15]
        [--no-kubernetes]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

PLANNED, MISSING_CLOUD, MISSING_LOCAL, REFUSED = ("planned", "missing cloud", "missing local file", "refused")
VERDICTS = (PLANNED, MISSING_CLOUD, MISSING_LOCAL, REFUSED)
_QUOTED = re.compile(r"'[^'\s]*'|\"[^\"\s]*\"")


def _null_variables(path: Path) -> tuple[list[str], list[str]]:
    """``--env``/``--secret`` flags for the variables the file leaves null (its user must pass them)."""
    from skyhop.spec.yaml_reader import read_yaml_documents

    envs: list[str] = []
    secrets: list[str] = []
    with contextlib.suppress(Exception):
        for doc in read_yaml_documents(str(path)):
            if not isinstance(doc, Mapping):
                continue
            for field, out in (("envs", envs), ("secrets", secrets)):
                found = doc.get(field)
                if isinstance(found, Mapping):
                    out += [f"{key}=example-value" for key, value in found.items() if value is None]
    return envs, secrets


REPO = Path(__file__).resolve().parent.parent
_FAKE_NODES = (
    ("cpu", 0, ""),
    ("h100", 8, "h100"),
    ("h200", 8, "h200"),
    ("a100-80gb", 8, "a100-80gb"),
    ("a100", 8, "a100"),
    ("l40s", 8, "l40s"),
    ("l4", 8, "l4"),
    ("t4", 4, "t4"),
    ("a10g", 4, "a10g"),
    ("mi300", 8, "mi300"),
    ("mi210", 4, "mi210"),
)


_CONTEXTS = ("gpu-cluster", "coreweave")
"""The kubeconfig's contexts: the user's cluster, and the one SkyPilot's CoreWeave examples pin
(``infra: kubernetes/coreweave``), which their users have."""


@contextlib.contextmanager
def _kubernetes_cluster(home: Path) -> Iterator[None]:
    """A fake cluster as ``~/.kube/config``'s current context, for the files that pin Kubernetes."""
    sys.path.insert(0, str(REPO))
    from tests.fakes.kubernetes import FakeKubernetes, NodeSpec, write_kubeconfig

    nodes = [
        NodeSpec(
            f"node-{name}",
            cpu="224",
            memory="2048Gi",
            gpus=gpus,
            labels={"skypilot.co/accelerator": label} if label else {},
            gpu_resource="amd.com/gpu" if name.startswith("mi") else "nvidia.com/gpu",
        )
        for name, gpus, label in _FAKE_NODES
    ]
    with contextlib.ExitStack() as stack:
        fakes = [
            stack.enter_context(FakeKubernetes(home / f"fake-{name}", nodes, loopback=True, context=name))
            for name in _CONTEXTS
        ]
        (home / ".kube").mkdir(exist_ok=True)
        write_kubeconfig(home / ".kube" / "config", fakes)
        (home / "config.yaml").write_text(f"kubernetes:\n  allowed_contexts: [{', '.join(_CONTEXTS)}]\n")
        yield


def _apply_volumes(files: list[Path]) -> list[str]:
    """Apply (``skyhop volumes apply``'s code) each volume a file's ``volumes:`` names, as the
    examples that use one say to do first (``sky volumes apply create-volume.yaml``)."""
    from skyhop.providers.kubernetes.client import open_context
    from skyhop.providers.kubernetes.settings import load_settings
    from skyhop.providers.kubernetes.volumes import apply_volume
    from skyhop.spec.volume import VolumeConfig, VolumeSpec
    from skyhop.spec.yaml_reader import read_yaml_documents

    names: set[str] = set()
    for path in files:
        with contextlib.suppress(Exception):
            for doc in read_yaml_documents(str(path)):
                volumes = doc.get("volumes") if isinstance(doc, Mapping) else None
                if isinstance(volumes, Mapping):
                    names |= {v if isinstance(v, str) else v.get("name") for v in volumes.values()}
    api = open_context(load_settings(), None)
    applied = sorted(n for n in names if isinstance(n, str))
    for name in applied:
        apply_volume(
            api, VolumeSpec(name=name, size="100Gi", config=VolumeConfig(access_mode="ReadWriteMany"))
        )
    return applied


def verdict(path: Path) -> tuple[str, str]:
    """``(verdict, reason)`` for one file, planned as ``launch --dryrun`` plans it: from the working
    directory, and where a local path is missing there, from the file's own folder."""
    found = _verdict(path)
    if found[0] != MISSING_LOCAL:
        return found
    root = Path.cwd()
    os.chdir(path.parent)
    try:
        again = _verdict(path)
    finally:
        os.chdir(root)
    return again if again[0] != MISSING_LOCAL else found


def _verdict(path: Path) -> tuple[str, str]:
    from skyhop.cli.planning import planned_dag
    from skyhop.optimizer import NoFeasibleOfferingError, optimize_dag
    from skyhop.providers.catalog import CatalogError
    from skyhop.providers.extras import ExtraMissingError
    from skyhop.spec import SpecError, TaskOverrides
    from skyhop.spec.refused import MissingCloudError

    envs, secrets = _null_variables(path)
    try:
        dag = planned_dag(str(path), TaskOverrides(envs=envs, secrets=secrets))
        optimize_dag(dag, minimize="cost")
    except MissingCloudError as exc:
        return MISSING_CLOUD, str(exc)
    except SpecError as exc:
        text = str(exc)
        if "does not exist" in text or "is not a directory" in text:
            return (REFUSED if "://" in text else MISSING_LOCAL), text
        return REFUSED, text
    except (NoFeasibleOfferingError, CatalogError, ExtraMissingError) as exc:
        return REFUSED, str(exc)
    return PLANNED, ""


def reason_key(reason: str) -> str:
    """A refusal's kind: its field path and message, without the file's own values."""
    text = re.sub(r"^task \d+: ", "", reason)
    text = re.sub(r"^(file_mounts|envs|secrets)\.[^:]*:", r"\1.<name>:", text)
    text = re.sub(r"^resources\.(any_of|ordered)\.\d+\.", r"resources.\1.<n>.", text)
    text = _QUOTED.sub("'…'", text.split(", got ")[0])
    text = re.sub(r"\d+(\.\d+)?", "N", text)
    return text[:140]


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        yield


def _cli_verdict(path: Path, root: Path) -> str:
    """What the real ``skyhop launch --dryrun`` says: planned (exit 0) or not (2: bad input, 1: none
    fits), from DIR and, where that is bad input, from the file's own folder, as ``verdict`` plans."""
    envs, secrets = _null_variables(path)
    flags = [f for e in envs for f in ("--env", e)] + [f for s in secrets for f in ("--secret", s)]
    skyhop = Path(sys.executable).parent / "skyhop"
    code = 2
    for cwd in (root, path.parent):
        done = subprocess.run(
            [str(skyhop), "launch", "--dryrun", "--json", str(path), *flags],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        code = done.returncode
        if code != 2:
            break
    return PLANNED if code == 0 else f"exit {code}"


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "dir", type=Path, help="a folder of SkyPilot task YAMLs (SkyPilot's repository layout)"
    )
    parser.add_argument("--accepted", type=Path, help="paths (relative to DIR) SkyPilot's schema accepts")
    parser.add_argument("--subprocess", type=int, default=0, help="also run N files through the CLI")
    parser.add_argument("--top", type=int, default=15, help="how many refusal reasons to show")
    parser.add_argument(
        "--no-kubernetes", action="store_true", help="plan with no Kubernetes context configured"
    )
    args = parser.parse_args()
    root = args.dir.resolve()
    accepted_file = args.accepted or root.parent / "SKY_ACCEPTED.txt"
    files = _files(root)
    if accepted_file.exists():
        wanted = {line.strip() for line in accepted_file.read_text().splitlines() if line.strip()}
        files = [p for p in files if str(p.relative_to(root)) in wanted]
        print(f"{len(files)} files SkyPilot's schema accepts ({accepted_file})")
    else:
        print(f"{len(files)} YAML files under {root}")
    home = Path(tempfile.mkdtemp(prefix="skyhop-examples-"))
    os.environ.update(SKYHOP_HOME=str(home), HOME=str(home))
    os.environ.pop("KUBECONFIG", None)
    (home / "skypilot").symlink_to(root)
    os.chdir(root)
    results: dict[Path, tuple[str, str]] = {}
    with contextlib.ExitStack() as stack:
        if not args.no_kubernetes:
            stack.enter_context(_kubernetes_cluster(home))
            print("planning with a Kubernetes context (a fake cluster of CPU and GPU nodes)")
            applied = _apply_volumes(files)
            print(f"volumes applied first, as the examples say: {', '.join(applied) or 'none'}")
        with _quiet():
            for path in files:
                results[path] = verdict(path)
        _report(args, root, files, results)
    return 0


def _report(
    args: argparse.Namespace, root: Path, files: list[Path], results: dict[Path, tuple[str, str]]
) -> None:
    counts = collections.Counter(v for v, _ in results.values())
    total = len(results)
    for name in VERDICTS:
        print(f"  {name:<20} {counts[name]:>4}  {_percent(counts[name], total)}")
    target = total - counts[MISSING_CLOUD]
    print(
        f"planned, missing clouds excepted: {counts[PLANNED]}/{target} = {_percent(counts[PLANNED], target)}"
    )
    schema_only = target - counts[MISSING_LOCAL]
    print(
        f"... and files naming local paths the corpus lacks: {counts[PLANNED]}/{schema_only}"
        f" = {_percent(counts[PLANNED], schema_only)}"
    )
    reasons = collections.Counter(reason_key(r) for v, r in results.values() if v not in (PLANNED,))
    print(f"top reasons ({sum(reasons.values())} files not planned):")
    for reason, count in reasons.most_common(args.top):
        print(f"  {count:>4}  {reason}")
    if args.subprocess:
        step = max(1, len(files) // args.subprocess)
        sample = files[::step][: args.subprocess]
        same = 0
        for path in sample:
            cli = _cli_verdict(path, root)
            mine = results[path][0]
            agree = (cli == PLANNED) == (mine == PLANNED)
            same += agree
            if not agree:
                print(f"  DIFFERS: {path.relative_to(root)}: in process {mine}, CLI {cli}")
        print(f"CLI subprocess agrees on {same}/{len(sample)} sampled files")


if __name__ == "__main__":
    raise SystemExit(main())
