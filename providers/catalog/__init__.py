"""Instance catalogs: what each cloud offers, where, and at what price.

A catalog is data the project owns (``providers/<cloud>/catalog.csv``), or what
``skyhop catalog update`` regenerated from the cloud's pricing API (``~/.skyhop/catalogs/``),
or a folder in SkyPilot's v8 CSV layout named by ``SKYHOP_CATALOG_DIR``. All three read into the
same ``Catalog``; parsed catalogs are cached by file size and mtime so optimizing stays fast.
"""

from skyhop.providers.catalog.errors import CatalogError
from skyhop.providers.catalog.model import Catalog, InstanceType, Location
from skyhop.providers.catalog.policy import CatalogPolicy, policy_for
from skyhop.providers.catalog.sources import CLOUDS, CatalogSet, load_catalogs

__all__ = [
    "CLOUDS",
    "Catalog",
    "CatalogError",
    "CatalogPolicy",
    "CatalogSet",
    "InstanceType",
    "Location",
    "load_catalogs",
    "policy_for",
]
