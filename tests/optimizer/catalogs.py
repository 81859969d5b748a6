"""Small hand-written catalogs for the optimizer's tests (prices chosen to make each rule visible)."""

from __future__ import annotations

from pathlib import Path

from skyhop.providers.catalog import Catalog, CatalogSet
from skyhop.providers.catalog.skyhop_csv import COLUMNS, read_skyhop_csv

AWS = """\
m6i.xlarge,4,16,,,,us-east-1,us-east-1a,0.192,0.07
m6i.xlarge,4,16,,,,us-east-1,us-east-1b,0.192,0.05
m6i.xlarge,4,16,,,,eu-west-1,eu-west-1a,0.214,0.06
m6i.2xlarge,8,32,,,,us-east-1,us-east-1a,0.384,0.12
c6i.2xlarge,8,16,,,,us-east-1,us-east-1a,0.34,0.30
r6i.2xlarge,8,64,,,,us-east-1,us-east-1a,0.504,0.15
t3.2xlarge,8,32,,,,us-east-1,us-east-1a,0.30,0.09
p5.48xlarge,192,2048,H100,8,80,us-east-1,us-east-1a,98.32,40.0
p5.48xlarge,192,2048,H100,8,80,us-west-2,us-west-2a,98.32,38.0
g5.xlarge,4,16,A10G,1,24,us-east-1,us-east-1a,1.006,0.40
g5.2xlarge,8,32,A10G,1,24,us-east-1,us-east-1a,1.212,0.35
g4dn.xlarge,4,16,T4,1,16,us-east-1,us-east-1a,0.526,0.20
"""
GCP = """\
n2-standard-8,8,32,,,,us-central1,us-central1-a,0.39,0.09
n2-standard-8,8,32,,,,us-central1,us-central1-b,0.39,0.08
n2-standard-8,8,32,,,,europe-west4,europe-west4-a,0.43,0.10
n2-standard-4,4,16,,,,us-central1,us-central1-a,0.195,0.045
e2-standard-8,8,32,,,,us-central1,us-central1-a,0.27,0.08
n1-standard-8,8,30,,,,us-central1,us-central1-a,0.38,0.08
n1-highmem-8,8,52,,,,us-central1,us-central1-a,0.47,0.10
n1-highmem-8,8,52,,,,europe-west4,europe-west4-a,0.52,0.11
n1-highmem-16,16,104,,,,us-central1,us-central1-a,0.95,0.20
n1-standard-4,4,15,,,,us-central1,us-central1-a,0.19,0.04
g2-standard-4,4,16,L4,1,24,us-central1,us-central1-a,0.71,0.28
a3-highgpu-8g,208,1872,H100,8,80,us-central1,us-central1-a,88.25,30.0
,,,V100,1,16,us-central1,us-central1-a,2.48,0.74
,,,V100,1,16,europe-west4,europe-west4-a,2.55,0.76
,,,T4,1,16,us-central1,us-central1-a,0.35,0.11
"""
AZURE = """\
Standard_D8s_v5,8,32,,,,eastus,,0.384,0.07
Standard_D8s_v5,8,32,,,,westeurope,,0.44,0.08
Standard_D4s_v5,4,16,,,,eastus,,0.19,0.035
Standard_NC4as_T4_v3,4,28,T4,1,16,eastus,,0.526,0.10
Standard_NC6s_v3,6,112,V100,1,16,eastus,,3.06,0.50
"""


def write(folder: Path, provider: str, rows: str) -> Path:
    path = folder / provider / "catalog.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(",".join(COLUMNS) + "\n" + rows)
    return path


def catalog(tmp_path: Path, provider: str, rows: str) -> Catalog:
    return read_skyhop_csv(provider, write(tmp_path, provider, rows))


def catalog_set(tmp_path: Path, **only: str) -> CatalogSet:
    """All three test clouds (or the ones named), restricted: ``local`` only when pinned."""
    rows = only or {"aws": AWS, "gcp": GCP, "azure": AZURE}
    return CatalogSet.of([catalog(tmp_path, p, r) for p, r in rows.items()], restricted=True)
