"""What a host has: CPUs, memory, GPUs (``nvidia-smi``), rsync, its home; and its host key.

One command over one connection per host. The first probe trusts the host key it is shown
(``ssh up`` is the user saying "these are my hosts"); later connections require that key.
"""

from __future__ import annotations

import asyncio

from skyhop.providers.accelerators import gpu_name
from skyhop.providers.runtime.errors import NodeUnreachableError
from skyhop.providers.ssh.connection import Endpoint, connect, run
from skyhop.providers.ssh.inventory import Host, HostFacts
from skyhop.providers.ssh.pools import HostSpec

__all__ = ["probe_host", "probe_hosts"]

PROBE_TIMEOUT_S = 20.0

_PROBE = r"""
printf 'hostname=%s\n' "$(hostname)"
printf 'home=%s\n' "$HOME"
printf 'cpus=%s\n' "$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN)"
printf 'mem_kib=%s\n' "$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)"
rsync --version >/dev/null 2>&1 && echo rsync=yes
python3 -c '' >/dev/null 2>&1 && echo python3=yes
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sed 's/^/gpu=/'
fi
"""


async def probe_host(spec: HostSpec) -> Host:
    """Probe one host; a host that does not answer is returned with ``error`` set."""
    endpoint = Endpoint(
        address=spec.address, port=spec.port, user=spec.user, identity_file=spec.identity_file
    )
    try:
        conn = await connect(endpoint)
        result = await run(endpoint, _PROBE, timeout=PROBE_TIMEOUT_S)
    except NodeUnreachableError as exc:
        return Host(spec=spec, error=str(exc).removeprefix(f"{endpoint.label}: "))
    key = conn.get_server_host_key()
    host_key = key.export_public_key("openssh").decode().split()[:2] if key is not None else []
    values: dict[str, list[str]] = {}
    for line in result.stdout.decode(errors="replace").splitlines():
        name, sep, value = line.partition("=")
        if sep:
            values.setdefault(name, []).append(value.strip())
    if result.exit_status != 0 or "home" not in values:
        return Host(spec=spec, error=f"the probe failed: {result.error_text()}")
    if "python3" not in values:
        return Host(spec=spec, error="python3 is not installed (skyhop's node runner needs it)")
    gpus: dict[str, float] = {}
    for raw in values.get("gpu", []):
        name = gpu_name(raw)
        gpus[name] = gpus.get(name, 0.0) + 1
    facts = HostFacts(
        hostname=values["hostname"][0],
        home=values["home"][0],
        cpus=int(values["cpus"][0] or 1),
        memory_gib=round(int(values["mem_kib"][0] or 0) / 1024**2, 1),
        accelerators=gpus,
        rsync="rsync" in values,
    )
    return Host(spec=spec, facts=facts, host_key=" ".join(host_key) or None)


async def probe_hosts(specs: list[HostSpec]) -> list[Host]:
    """Probe hosts in parallel, in the order given."""
    return list(await asyncio.gather(*(probe_host(spec) for spec in specs)))
