"""``catalog update``'s pricing clients on recorded API responses (botocore Stubber; a loopback server)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from skyhop.providers.catalog import Catalog
from skyhop.providers.catalog.skyhop_csv import read_skyhop_csv
from skyhop.providers.catalog.update import write_catalog
from tests.optimizer.catalogs import catalog

DATA = Path(__file__).parent / "data"


def _load(name: str) -> Any:
    return json.loads((DATA / name).read_text())


class _Served(BaseHTTPRequestHandler):
    """Serves recorded pages: ``/skus`` by pageToken, ``/prices`` then ``/prices/page2``."""

    base = ""
    requests: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        url = urlparse(self.path)
        type(self).requests.append(self.path)
        query = parse_qs(url.query)
        if url.path == "/skus":
            name = "gcp_skus_page2.json" if query.get("pageToken") == ["p2"] else "gcp_skus_page1.json"
        elif url.path == "/prices/page2":
            name = "azure_prices_page2.json"
        elif url.path == "/prices":
            name = "azure_prices_page1.json"
        else:
            self.send_error(404)
            return
        body = (DATA / name).read_text().replace("__BASE__", f"{type(self).base}/prices").encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Served)
    base = f"http://127.0.0.1:{httpd.server_port}"
    _Served.base, _Served.requests = base, []
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield base
    httpd.shutdown()
    httpd.server_close()


def _rows_to_catalog(tmp_path: Path, provider: str, rows: list[Any]) -> Catalog:
    path = tmp_path / "out" / provider / "catalog.csv"
    write_catalog(path, rows)
    return read_skyhop_csv(provider, path)


def test_gcp_reprices_machines_and_gpus_from_the_billing_catalog(
    tmp_path: Path, server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from skyhop.providers.gcp.pricing import fetch_rows

    monkeypatch.setenv("SKYHOP_GCP_BILLING_URL", f"{server}/skus")
    monkeypatch.setenv("GOOGLE_API_KEY", "test-key")
    shapes = catalog(
        tmp_path,
        "gcp",
        "n2-standard-8,8,32,,,,us-central1,us-central1-a,9,9\n"
        "n1-highmem-8,8,52,,,,us-central1,us-central1-b,9,9\n"
        "g2-standard-4,4,16,L4,1,24,us-central1,us-central1-a,9,9\n"
        "n2-standard-8,8,32,,,,europe-west4,europe-west4-a,9,9\n"
        ",,,V100,1,16,us-central1,us-central1-b,9,9\n"
        "tpu-v2-8,96,334,tpu-v2-8,1,,us-central1,us-central1-b,4.5,1.35\n",
    )
    result = _rows_to_catalog(tmp_path, "gcp", fetch_rows(shapes))
    # europe-west4 has no price in the recording, so it is dropped.
    ((region, zone, price, spot),) = result.locations["n2-standard-8"]
    assert (region, zone) == ("us-central1", "us-central1-a")
    assert price == pytest.approx(8 * 0.031611 + 32 * 0.004237)
    assert spot == pytest.approx(8 * 0.00765 + 32 * 0.001025)
    assert result.locations["n1-highmem-8"][0][2] == pytest.approx(8 * 0.031611 + 52 * 0.004237)
    l4 = result.locations["g2-standard-4"][0]
    assert l4[2] == pytest.approx(4 * 0.024988 + 16 * 0.002928 + 0.56004)
    assert l4[3] is None
    assert result.attachable[("V100", 1.0)] == [("us-central1", "us-central1-b", 2.48, 0.744)]
    # Cloud TPU's SKUs are not read: the TPU VM keeps the price it had.
    assert result.locations["tpu-v2-8"] == [("us-central1", "us-central1-b", 4.5, 1.35)]
    assert len(_Served.requests) == 2 and "key=test-key" in _Served.requests[0]
    assert "pageToken=p2" in _Served.requests[1]


def test_azure_takes_linux_pay_as_you_go_and_spot_prices(
    tmp_path: Path, server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from skyhop.providers.azure.pricing import fetch_rows

    monkeypatch.setenv("SKYHOP_AZURE_PRICES_URL", f"{server}/prices")
    shapes = catalog(
        tmp_path,
        "azure",
        "Standard_D4s_v5,4,16,,,,eastus,,9,9\nStandard_NC6s_v3,6,112,V100,1,16,eastus,,9,9\n",
    )
    result = _rows_to_catalog(tmp_path, "azure", fetch_rows(shapes))
    assert sorted(result.locations["Standard_D4s_v5"]) == [
        ("eastus", None, 0.192, 0.0374),
        ("westeurope", None, 0.23, None),
    ]
    assert result.types["Standard_NC6s_v3"].accelerator == "V100"
    assert result.locations["Standard_NC6s_v3"] == [("eastus", None, 3.06, 0.612)]
    assert "Standard_NEW_v9" not in result.types  # unknown size: the API gives no vCPUs or memory
    assert "%24filter=serviceName" in _Served.requests[0]


def test_aws_reads_the_price_list_and_spot_history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import boto3
    from botocore.stub import ANY, Stubber

    from skyhop.providers.aws.pricing import fetch_rows

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    session = boto3.session.Session(region_name="us-east-1")
    pricing = session.client("pricing", region_name="us-east-1")
    ec2 = {r: session.client("ec2", region_name=r) for r in ("us-east-1", "eu-west-1")}
    stubs = [Stubber(pricing), *(Stubber(c) for c in ec2.values())]
    pages = _load("aws_price_list.json")
    stubs[0].add_response("get_products", pages[0], {"ServiceCode": "AmazonEC2", "Filters": ANY})
    stubs[0].add_response(
        "get_products", pages[1], {"ServiceCode": "AmazonEC2", "Filters": ANY, "NextToken": "page2"}
    )
    spot = _load("aws_spot_price_history.json")
    for stub, region in zip(stubs[1:], ec2, strict=True):
        history = [dict(e, Timestamp=datetime.fromisoformat(e["Timestamp"])) for e in spot[region]]
        stub.add_response(
            "describe_spot_price_history",
            {"SpotPriceHistory": history},
            {"InstanceTypes": ANY, "ProductDescriptions": ["Linux/UNIX"], "StartTime": ANY},
        )
    for stub in stubs:
        stub.activate()

    class _Session:
        def client(self, service: str, region_name: str) -> Any:
            return pricing if service == "pricing" else ec2[region_name]

    shapes = catalog(tmp_path, "aws", "g5.xlarge,4,16,A10G,1,24,us-east-1,us-east-1a,9,9\n")
    result = _rows_to_catalog(tmp_path, "aws", fetch_rows(shapes, session=_Session()))
    for stub in stubs:
        stub.assert_no_pending_responses()
    assert sorted(result.locations["m6i.xlarge"]) == [
        ("eu-west-1", None, 0.214, None),  # no spot history there: one region-wide row
        ("us-east-1", "us-east-1a", 0.192, 0.069),  # the latest of two records
        ("us-east-1", "us-east-1b", 0.192, 0.052),
    ]
    assert result.types["m7a.large"].cpus == 2  # a CPU type the catalog did not know
    assert result.types["g5.xlarge"].accelerator == "A10G"
    assert "p4d.24xlarge" not in result.types and "inf2.xlarge" not in result.types  # GPUs it cannot name
