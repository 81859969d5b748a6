"""The node scripts on their own: an ``https://`` file is downloaded to its target (COPY only)."""

from __future__ import annotations

import http.server
import os
import ssl
import subprocess
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from skyhop.spec.storage import StorageMode
from skyhop.storage.node_commands import attach_script
from skyhop.storage.plan import MountPlan


@pytest.fixture
def https_files(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A loopback HTTPS server of a folder, with a self-signed certificate; its URL and the cert."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    served = tmp_path / "served"
    served.mkdir()
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    (served / "weights.bin").write_bytes(b"w" * 100_000)
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}", cert
    finally:
        server.shutdown()
        server.server_close()


def test_an_https_file_lands_at_its_target(https_files: tuple[str, Path], tmp_path: Path) -> None:
    url, cert = https_files
    node = tmp_path / "node"
    node.mkdir()
    plan = MountPlan(target="~/models/w.bin", mode=StorageMode.COPY, url=f"{url}/weights.bin")
    env = {**os.environ, "HOME": str(node), "SSL_CERT_FILE": str(cert)}
    env.pop("AWS_CA_BUNDLE", None)
    done = subprocess.run(["bash", "-c", attach_script([plan])], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (node / "models" / "w.bin").read_bytes() == b"w" * 100_000
