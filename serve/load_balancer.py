"""A service's load balancer: ``python -m skyhop.serve.load_balancer --token-file PATH [--port P]``.

One process per service, next to the worker. It listens on loopback unless told otherwise, prints
one ``LoadBalancerReady`` JSON line once both its ports listen, and forwards to the READY replicas
its controller pushes to the control port (``skyhop.contract.serve``). It holds no state worth
keeping: a restarted load balancer gets the set again from its controller.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import os
import signal
import sys
from pathlib import Path
from typing import NoReturn

from skyhop.contract.serve import LoadBalancerReady, LoadBalancingPolicy
from skyhop.serve.control import ControlServer, TokenFileError, read_token_file
from skyhop.serve.http1 import HEAD_LIMIT
from skyhop.serve.proxy import Proxy, ProxyTimeouts
from skyhop.serve.replicas import ReplicaSet

__all__ = ["main", "serve"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"Error: {message}\n")


def _positive(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text}: must be a number of seconds above 0")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m skyhop.serve.load_balancer", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--token-file", type=Path, required=True, help="bearer token of the control port (mode 0600)"
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="address of the service endpoint (default loopback)"
    )
    parser.add_argument("--port", type=int, default=0, help="service endpoint port (default: a free one)")
    parser.add_argument(
        "--control-port", type=int, default=0, help="control port on 127.0.0.1 (default: a free one)"
    )
    policies = [policy.value for policy in LoadBalancingPolicy]
    parser.add_argument("--policy", choices=policies, default=LoadBalancingPolicy.LEAST_LOAD.value)
    parser.add_argument("--connect-timeout", type=_positive, default=ProxyTimeouts.connect)
    parser.add_argument("--response-timeout", type=_positive, default=ProxyTimeouts.response)
    parser.add_argument("--hold-timeout", type=_positive, default=ProxyTimeouts.hold)
    parser.add_argument("--window-seconds", type=int, choices=range(1, 3601), default=60, metavar="1..3600")
    return parser


async def serve(args: argparse.Namespace, token: str) -> None:
    """Listen on both ports, announce them, and serve until SIGTERM or SIGINT."""
    replicas = ReplicaSet(LoadBalancingPolicy(args.policy), args.window_seconds)
    proxy = Proxy(replicas, ProxyTimeouts(args.connect_timeout, args.response_timeout, args.hold_timeout))
    control = ControlServer(replicas, token)
    endpoint = await asyncio.start_server(proxy.handle, args.host, args.port, limit=HEAD_LIMIT, backlog=1024)
    control_server = await asyncio.start_server(
        control.handle, "127.0.0.1", args.control_port, limit=HEAD_LIMIT
    )
    ready = LoadBalancerReady(
        pid=os.getpid(),
        host=args.host,
        port=endpoint.sockets[0].getsockname()[1],
        control_port=control_server.sockets[0].getsockname()[1],
    )
    print(ready.model_dump_json(), flush=True)
    logging.info(
        "serving %s:%d (%s), control on 127.0.0.1:%d", args.host, ready.port, args.policy, ready.control_port
    )
    # Each request allocates a few dozen short-lived objects, all freed by reference counting: the
    # cyclic collector need not walk the startup objects (frozen) nor run every 700 allocations.
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with endpoint, control_server:
        await stop.wait()


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    # The log (stderr) is what ``serve logs --load-balancer`` will show: start, and each replica set.
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    if not 0 <= args.port <= 65535 or not 0 <= args.control_port <= 65535:
        print("Error: --port and --control-port: a TCP port, 0..65535 (0: a free one)", file=sys.stderr)
        sys.exit(2)
    try:
        token = read_token_file(args.token_file)
    except TokenFileError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        sys.exit(2)
    try:
        import uvloop
    except ImportError:
        runner = asyncio.run
    else:
        runner = uvloop.run
    try:
        runner(serve(args, token))
    except OSError as exc:
        print(f"Error: load balancer could not listen: {exc}", file=sys.stderr)
        sys.exit(1)
    with contextlib.suppress(BrokenPipeError):
        sys.stdout.flush()


if __name__ == "__main__":
    main()
