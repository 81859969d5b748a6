"""SkyServe's load balancer reduced to its request path, for ``benchmarks/load_balancer.py``:
FastAPI, one ``httpx.AsyncClient`` sending with ``stream=True``, a ``StreamingResponse`` back, least
load by in-process counters, under uvicorn.

    python benchmarks/skyserve_style_proxy.py PORT REPLICA_PORT...
"""

# No ``from __future__ import annotations``: FastAPI reads the handler's annotations at runtime.
import sys

import fastapi
import httpx
import uvicorn
from starlette.background import BackgroundTask
from starlette.responses import StreamingResponse


def app_for(replica_ports: list[int]) -> fastapi.FastAPI:
    app = fastapi.FastAPI()
    # One client per replica with httpx's default limits, as SkyServe's ``_client_pool``.
    clients = {
        port: httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=None) for port in replica_ports
    }
    load = dict.fromkeys(replica_ports, 0)

    @app.api_route("/{path:path}", methods=["GET", "POST", "PUT", "DELETE"])
    async def forward(request: fastapi.Request) -> StreamingResponse:
        replica = min(load, key=load.__getitem__)
        load[replica] += 1
        try:
            client = clients[replica]
            upstream = client.build_request(
                request.method,
                httpx.URL(path=request.url.path, query=request.url.query.encode()),
                headers=request.headers.raw,
                content=await request.body(),
            )
            response = await client.send(upstream, stream=True)
        except BaseException:
            load[replica] -= 1
            raise

        async def done() -> None:
            load[replica] -= 1
            await response.aclose()

        return StreamingResponse(
            response.aiter_raw(),
            status_code=response.status_code,
            headers=response.headers,
            background=BackgroundTask(done),
        )

    return app


if __name__ == "__main__":
    port, *replicas = (int(arg) for arg in sys.argv[1:])
    uvicorn.run(app_for(replicas), host="127.0.0.1", port=port, log_level="warning")
