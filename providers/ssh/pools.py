"""Reading ``ssh_node_pools.yaml``, SkyPilot's layout for named pools of SSH hosts.

::

    lab:                              # pool name: --infra ssh/lab
      user: ubuntu
      identity_file: ~/.ssh/id_ed25519
      port: 22                        # optional
      hosts:
        - 192.168.1.10                # takes the pool's user, key and port
        - ip: 192.168.1.11            # overrides any of them
          user: root
          identity_file: ~/.ssh/other
          port: 2222

Everything a user can get wrong is reported as one ``PoolsError`` naming the field.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict

from skyhop.providers.home import skyhop_home

__all__ = ["HostSpec", "PoolsError", "default_pools_file", "load_pools", "parse_pools"]

_POOL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")
_POOL_KEYS = {"user", "identity_file", "port", "hosts", "password", "use_ssh_config"}
_HOST_KEYS = {"ip", "user", "identity_file", "port", "password", "use_ssh_config"}


class PoolsError(ValueError):
    """The pools file is unreadable or a field in it is invalid (the message names the field)."""


class HostSpec(BaseModel):
    """One host of a pool, with the pool's defaults applied."""

    model_config = ConfigDict(frozen=True)

    pool: str
    address: str
    port: int = 22
    user: str
    identity_file: str | None = None

    @property
    def host_id(self) -> str:
        """``<pool>/<address>:<port>``: unique across pools, stable across ``ssh up`` runs."""
        return f"{self.pool}/{self.address}:{self.port}"


def default_pools_file() -> Path:
    """Where ``skyhop ssh up`` looks without an argument."""
    return skyhop_home() / "ssh_node_pools.yaml"


def load_pools(path: Path) -> dict[str, list[HostSpec]]:
    """Read and validate a pools file."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise PoolsError(f"cannot read {path}: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        raise PoolsError(f"{path}{line}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    return parse_pools(data, str(path))


def parse_pools(data: object, source: str = "pools") -> dict[str, list[HostSpec]]:
    """Validate the pools mapping; ``source`` prefixes every message."""
    if not isinstance(data, dict) or not data:
        raise PoolsError(f"{source}: expected a mapping of pool names to pools, got {_kind(data)}")
    pools: dict[str, list[HostSpec]] = {}
    for name, pool in data.items():
        if not isinstance(name, str) or not _POOL_NAME.fullmatch(name):
            raise PoolsError(
                f"{source}: pool name {name!r} is invalid: use letters, digits, '.', '_' and '-', "
                "starting with a letter or digit, at most 63 characters"
            )
        pools[name] = _parse_pool(name, pool, f"{source}: {name}")
    return pools


def _parse_pool(name: str, pool: object, where: str) -> list[HostSpec]:
    if not isinstance(pool, dict):
        raise PoolsError(f"{where}: expected a mapping with 'hosts', got {_kind(pool)}")
    _check_keys(pool, _POOL_KEYS, where)
    defaults = _connection_fields(pool, where)
    hosts = pool.get("hosts")
    if not isinstance(hosts, list) or not hosts:
        raise PoolsError(f"{where}.hosts: expected a non-empty list of hosts, got {_kind(hosts)}")
    specs: list[HostSpec] = []
    for index, host in enumerate(hosts):
        at = f"{where}.hosts[{index}]"
        if isinstance(host, str) and host.strip():
            fields: dict[str, Any] = {"address": host.strip()}
        elif isinstance(host, dict):
            _check_keys(host, _HOST_KEYS, at)
            address = host.get("ip")
            if not isinstance(address, str) or not address.strip():
                raise PoolsError(f"{at}.ip: expected a host name or IP address, got {_kind(address)}")
            fields = {"address": address.strip(), **_connection_fields(host, at)}
        else:
            raise PoolsError(f"{at}: expected a host name, an IP address or a mapping with 'ip'")
        merged = {**defaults, **fields}
        if "user" not in merged:
            raise PoolsError(f"{at}: no 'user' for this host (set it on the pool or the host)")
        spec = HostSpec(pool=name, **merged)
        if any(s.host_id == spec.host_id for s in specs):
            raise PoolsError(f"{at}: {spec.address}:{spec.port} is listed twice")
        specs.append(spec)
    return specs


def _connection_fields(raw: dict[Any, Any], where: str) -> dict[str, Any]:
    if "password" in raw or raw.get("use_ssh_config"):
        key = "password" if "password" in raw else "use_ssh_config"
        raise PoolsError(f"{where}.{key}: not supported; give 'user' and 'identity_file' (key-based login)")
    fields: dict[str, Any] = {}
    if "user" in raw:
        if not isinstance(raw["user"], str) or not raw["user"]:
            raise PoolsError(f"{where}.user: expected a login name, got {_kind(raw['user'])}")
        fields["user"] = raw["user"]
    if "identity_file" in raw:
        key = raw["identity_file"]
        if not isinstance(key, str) or not key:
            raise PoolsError(f"{where}.identity_file: expected a path to a private key, got {_kind(key)}")
        path = Path(key).expanduser()
        if not path.is_file():
            raise PoolsError(f"{where}.identity_file: {key} does not exist")
        fields["identity_file"] = str(path.resolve())
    if "port" in raw:
        port = raw["port"]
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            raise PoolsError(f"{where}.port: expected an integer from 1 to 65535, got {port!r}")
        fields["port"] = port
    return fields


def _check_keys(raw: dict[Any, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(str(key) for key in raw if key not in allowed)
    if unknown:
        raise PoolsError(f"{where}: unknown field {unknown[0]!r}; allowed: {', '.join(sorted(allowed))}")


def _kind(value: object) -> str:
    return "nothing" if value is None else type(value).__name__
