"""The worker process: ``skyhop worker``, and what the embedded server and the tests spawn.

``python -m cli.worker_process [--address HOST:PORT] [--ready-file PATH] [--codec-port PORT
[--codec-origin URL]...]``. It finds Temporal (the configured address, or the embedded server,
started if needed), connects with the user's payload keyring, and hands the client to
``worker.serve``; configuration problems are one line and exit code 2, a server that cannot start
one line and exit code 1. With ``--codec-port`` it also serves the codec server
(``cli/codec_server.py``) for the Web UI at those origins: the embedded server's worker does.

``SKYHOP_WORKER_CACHED_WORKFLOWS`` sizes the worker's sticky cache (``worker.CACHED_WORKFLOWS`` by
default): the memory of idle workflows against the replay an evicted one costs on its next event.
``SKYHOP_WORKER_STICKY_TIMEOUT_S`` is how long a cached workflow's next task waits for this worker
(``worker.STICKY_TIMEOUT``): a burst's tasks wait their turn, a killed worker's wait that long.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import resource
import sys
from datetime import timedelta

from skyhop.cli.client import connect
from skyhop.cli.config import ConfigError, load_config
from skyhop.cli.embedded import ServerError, ensure_running
from skyhop.cli.output import EXIT_USAGE, exit_now

__all__ = ["main"]

log = logging.getLogger("skyhop.worker")


def cached_workflows() -> int:
    """The sticky cache size from ``SKYHOP_WORKER_CACHED_WORKFLOWS``; ConfigError when it is not one."""
    from skyhop import worker

    least = worker.WORKFLOW_TASK_SLOTS
    return _whole_number(
        "SKYHOP_WORKER_CACHED_WORKFLOWS",
        worker.CACHED_WORKFLOWS,
        least,
        f"at least {least} (the workflow tasks a worker runs at once)",
    )


def sticky_timeout() -> timedelta:
    """How long a cached workflow's task waits for this worker, from ``SKYHOP_WORKER_STICKY_TIMEOUT_S``."""
    from skyhop import worker

    default = int(worker.STICKY_TIMEOUT.total_seconds())
    return timedelta(
        seconds=_whole_number("SKYHOP_WORKER_STICKY_TIMEOUT_S", default, 1, "at least 1 (seconds)")
    )


def _whole_number(name: str, default: int, least: int, allowed: str) -> int:
    """The environment's ``name``, or ``default`` without it; ConfigError saying ``allowed`` when
    it is not a whole number of at least ``least``."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    if not raw.strip().isdigit() or int(raw) < least:
        raise ConfigError(f"{name}={raw!r}: must be a whole number of {allowed}")
    return int(raw)


async def _run(
    address: str | None, ready_file: str | None, codec_port: int | None, origins: list[str]
) -> None:
    from skyhop import worker

    cache, sticky = cached_workflows(), sticky_timeout()
    config = load_config()
    if codec_port is not None:
        from skyhop.cli.codec_server import start_codec

        await start_codec(config, codec_port, origins)
        log.info("codec server on 127.0.0.1:%d for %s", codec_port, ", ".join(origins) or "no web origin")
    target = address or config.address
    if target is None:
        target = ensure_running(config, log.info, with_worker=False).address
        log.info("no Temporal configured: running against the embedded server at %s", target)
    client = await connect(config, target, server_starting=True)
    await worker.serve(client, ready_file, cached_workflows=cache, sticky_timeout=sticky)


def _open_files_to_hard_limit() -> None:
    """Raise the soft limit on open files to the hard one: a watch hub holds a pidfd per running
    job's runner on nodes in this process (``activities.runner_exits``) within half of it, and a
    soft limit of 1,024 would leave most of 10,000 runs asked every second instead."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        with contextlib.suppress(ValueError, OSError):  # an unlimited hard limit is above the kernel's
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="skyhop worker", description=__doc__)
    parser.add_argument("--address", help="Temporal frontend host:port (default: from skyhop's config)")
    parser.add_argument("--ready-file", help="write the worker's pid here once it polls")
    parser.add_argument("--codec-port", type=int, help="also serve the codec server on this loopback port")
    parser.add_argument("--codec-origin", action="append", default=[], help="a web origin it answers")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _open_files_to_hard_limit()
    try:
        asyncio.run(_run(args.address, args.ready_file, args.codec_port, args.codec_origin))
    except ConfigError as exc:  # includes a missing or malformed payload key
        print(f"Error: {exc}", file=sys.stderr)
        exit_now(EXIT_USAGE)
    except ServerError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        exit_now(1)
    exit_now(0)


if __name__ == "__main__":
    main()
