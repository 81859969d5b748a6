"""Which catalog file each cloud reads, in order of precedence.

1. ``SKYHOP_CATALOG_DIR`` (or ``catalog.dir`` in ``~/.skyhop/config.yaml``): a folder in SkyPilot's
   v8 layout (``<dir>/<cloud>/vms.csv``) or skyhop's (``<dir>/<cloud>/catalog.csv``). Only the clouds
   found there are candidates; providers without a catalog (``local``) only when asked for by name.
2. ``~/.skyhop/catalogs/<cloud>/catalog.csv``, written by ``skyhop catalog update``.
3. The catalog shipped in ``providers/<cloud>/catalog.csv``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from skyhop.providers.catalog.cache import cached_catalog
from skyhop.providers.catalog.errors import CatalogError
from skyhop.providers.catalog.model import Catalog
from skyhop.providers.catalog.skyhop_csv import read_skyhop_csv
from skyhop.providers.catalog.skypilot_v8 import read_skypilot_v8
from skyhop.providers.home import skyhop_home

__all__ = ["CLOUDS", "CatalogSet", "catalog_dir_override", "load_catalogs", "user_catalog_path"]

CLOUDS = ("aws", "gcp", "azure")
"""Clouds skyhop ships a catalog for."""

_SHIPPED = Path(__file__).resolve().parent.parent
Reader = Callable[[str, Path], Catalog]


def user_catalog_path(cloud: str) -> Path:
    """Where ``skyhop catalog update`` stores ``cloud``'s regenerated catalog."""
    return skyhop_home() / "catalogs" / cloud / "catalog.csv"


def catalog_dir_override() -> Path | None:
    """The folder named by ``SKYHOP_CATALOG_DIR`` or the config's ``catalog.dir``, if any."""
    value = os.environ.get("SKYHOP_CATALOG_DIR")
    if not value:
        config = skyhop_home() / "config.yaml"
        if config.exists():
            import yaml

            try:
                data = yaml.safe_load(config.read_text()) or {}
            except (OSError, yaml.YAMLError):
                data = {}
            section = data.get("catalog") if isinstance(data, dict) else None
            value = section.get("dir") if isinstance(section, dict) else None
    if not value:
        return None
    folder = Path(str(value)).expanduser()
    if not folder.is_dir():
        raise CatalogError(str(folder), 0, "SKYHOP_CATALOG_DIR / catalog.dir is not a folder")
    return folder


class CatalogSet:
    """The catalogs the optimizer may choose from; each file is read (or un-cached) on first use."""

    def __init__(self, files: dict[str, tuple[Path, Reader]], *, restricted: bool) -> None:
        self._files = files
        self._loaded: dict[str, Catalog] = {}
        self.restricted = restricted
        """True when an override folder decides the clouds: catalog-less providers only when pinned."""

    @property
    def names(self) -> list[str]:
        """Clouds with a catalog, in a fixed order."""
        return list(self._files)

    def get(self, name: str) -> Catalog:
        """``name``'s catalog (KeyError if it has none)."""
        if name not in self._loaded:
            path, reader = self._files[name]
            self._loaded[name] = cached_catalog(path, lambda: reader(name, path))
        return self._loaded[name]

    @classmethod
    def of(cls, catalogs: list[Catalog], *, restricted: bool = False) -> CatalogSet:
        """A set of catalogs already in memory (tests, benchmarks)."""
        result = cls({}, restricted=restricted)
        for catalog in catalogs:
            result._files[catalog.provider] = (Path(catalog.source), read_skyhop_csv)
            result._loaded[catalog.provider] = catalog
        return result


def load_catalogs() -> CatalogSet:
    """The catalogs in effect, by the precedence above (nothing is parsed yet)."""
    override = catalog_dir_override()
    files: dict[str, tuple[Path, Reader]] = {}
    if override is not None:
        for cloud in CLOUDS:
            if (override / cloud / "catalog.csv").is_file():
                files[cloud] = (override / cloud / "catalog.csv", read_skyhop_csv)
            elif (override / cloud / "vms.csv").is_file():
                files[cloud] = (override / cloud / "vms.csv", read_skypilot_v8)
        return CatalogSet(files, restricted=True)
    for cloud in CLOUDS:
        user = user_catalog_path(cloud)
        files[cloud] = (user if user.is_file() else _SHIPPED / cloud / "catalog.csv", read_skyhop_csv)
    return CatalogSet(files, restricted=False)
