"""What reading the deployment's ``skyhop check`` verdicts costs a worker, per read.

An optimize reads the verdicts several times (``storage/shared_state.py``). Measured on a folder
store and on an S3 store (moto's server on loopback), within the revalidation window (the local
copy only) and revalidating on every read (a stat, or a conditional GET answered 304), the median
of ``--reads`` reads. Needs the test extra (moto): ``python benchmarks/shared_state.py``.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def median_ms(call: Callable[[], object], reads: int) -> float:
    took = []
    for _ in range(reads):
        began = time.perf_counter()
        call()
        took.append(time.perf_counter() - began)
    return statistics.median(took) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, default=200)
    args = parser.parse_args()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    from moto.server import ThreadedMotoServer

    folder = Path(tempfile.mkdtemp(prefix="skyhop-shared-state-"))
    os.environ.update(
        SKYHOP_HOME=str(folder / "worker"),
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-east-1",
    )
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        os.environ["SKYHOP_STORE_ENDPOINT_URL"] = f"http://{host}:{port}"
        import boto3

        boto3.client("s3", endpoint_url=os.environ["SKYHOP_STORE_ENDPOINT_URL"]).create_bucket(
            Bucket="bench-state"
        )
        from skyhop.providers.base import CheckResult
        from skyhop.providers.registry import read_checks, write_checks
        from skyhop.storage.content import FolderContentStore, S3ContentStore

        for kind, url, store in (
            ("folder", (folder / "store").as_uri(), FolderContentStore),
            ("s3", "s3://bench-state/skyhop", S3ContentStore),
        ):
            os.environ["SKYHOP_STORE_URL"] = url
            write_checks({"aws": CheckResult(enabled=True, reason="benchmark")})
            read_checks()
            window = median_ms(read_checks, args.reads)
            kept = store.revalidate_s
            store.revalidate_s = 0.0
            always = median_ms(read_checks, args.reads)
            store.revalidate_s = kept
            print(
                f"{kind:6} read_checks median: {window:.3f} ms within the {kept:g} s window, "
                f"{always:.3f} ms revalidating on every read"
            )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
