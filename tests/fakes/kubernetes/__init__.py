"""A local Kubernetes API server with real semantics, for the ``kubernetes`` provider's tests.

The ``kubernetes`` Python client and the machine's ``kubectl`` work against it unchanged: it has the
API's paths, JSON shapes, ``Status`` errors, ``resourceVersion``/``uid``, selectors, watch, and exec
over WebSocket. Behind it: a store with a watchable history (``store.py``), the default scheduler's
filters and messages (``scheduler.py``), an optional cluster autoscaler (``autoscaler.py``), a kubelet
that runs containers as real processes, each pod in a network namespace with its own IP where root
allows (``kubelet.py``, ``sandbox.py``), and exec (``exec.py``). ``FakeKubernetes`` (``cluster.py``)
ties them together with commands for tests; the ``fake_kubernetes`` fixture (``fixture.py``) is what
provider tests use.

Where it departs from a real cluster: one machine hosts every node (a node's allocatable is what it
declares, not what the machine has) and a container runs on this machine's filesystem (its ``image``
is only recorded; a pod's own folder is its ``/root``), and a container of a Docker-in-Docker or
BuildKit image runs ``sleep infinity`` in place of its daemon (Ready, nothing on its socket:
``kubelet._DAEMON_IMAGES``); no init containers, probes, PDBs, quotas,
priorities, RBAC, admission webhooks or aggregated discovery; of volumes, only PersistentVolumeClaims:
Bound at once (StorageClass ``standard`` by default, no PersistentVolume objects, no size enforced,
deletable while in use), each a folder of this machine that a pod mounts only under ``/root`` (a bind
mount in the pod's mount namespace, a symlink on loopback: ``kubelet.py``); no OpenAPI (``kubectl
create`` and ``apply`` need ``--validate=false``); one bearer token, no users or client certificates;
strategic merge patch is a plain merge patch; services get a cluster IP but no proxying or
endpoints; CrashLoopBackOff is 1-10 s, not 10 s-5 min; namespaces cannot be deleted.
"""

from tests.fakes.kubernetes.autoscaler import NodeGroup
from tests.fakes.kubernetes.cluster import FakeKubernetes, write_kubeconfig
from tests.fakes.kubernetes.nodes import GPU_LABELS, NodeSpec

__all__ = ["GPU_LABELS", "FakeKubernetes", "NodeGroup", "NodeSpec", "write_kubeconfig"]
