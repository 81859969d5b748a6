"""``skyhop server status|start|stop|codec``."""

from __future__ import annotations

import json

from skyhop.cli.config import load_config
from skyhop.cli.output import info

__all__ = ["run_server_codec", "run_server_start", "run_server_status", "run_server_stop"]


def run_server_status() -> int:
    """Print where Temporal is and whether the embedded server and worker run."""
    from skyhop.cli.embedded import read_state, server_running, state_dir, worker_running

    config = load_config()
    if not config.embedded:
        print(
            json.dumps(
                {"mode": "external", "address": config.address, "namespace": config.namespace}, indent=2
            )
        )
        return 0
    state = read_state()
    if state is None:
        info("The embedded server is not running; any command (or 'skyhop server start') starts it.")
        return 1
    report = {
        "mode": "embedded",
        "address": state.address,
        "namespace": state.namespace,
        "web_ui": state.ui_url,
        "http_api_port": state.http_port,
        "metrics_port": state.metrics_port,
        "server_pid": state.server_pid,
        "server_running": server_running(state),
        "worker_pid": state.worker_pid,
        "worker_running": worker_running(state),
        "database": state.db_file,
        "logs": str(state_dir()),
    }
    if state.codec_port:
        from skyhop.cli.codec_server import codec_token, endpoint

        report["codec_endpoint"] = endpoint(state.codec_port, codec_token())
    width = max(len(k) for k in report)
    for key, value in report.items():
        print(f"{key.ljust(width)}  {value}")
    if not report["server_running"]:
        info("The embedded server is not running; 'skyhop server start' (or any command) starts it again.")
    elif not report["worker_running"]:
        info(
            "The worker is not running, so nothing executes; 'skyhop server start' (or any command) "
            f"starts it again (its last log: {state_dir() / 'worker.log'})."
        )
    return 0 if report["server_running"] and report["worker_running"] else 1


async def run_server_start() -> int:
    """Start (or find) the embedded server and worker, and say where they are."""
    from skyhop.cli.embedded import ensure_running

    config = load_config()
    if not config.embedded:
        info(f"Using the Temporal at {config.address}; nothing to start here.")
        return 0
    state = ensure_running(config)
    info(f"Temporal at {state.address} (namespace {state.namespace}), Web UI at {state.ui_url}")
    info(f"Worker pid {state.worker_pid}")
    return 0


def run_server_stop() -> int:
    """Stop the embedded worker and server."""
    from skyhop.cli.embedded import stop

    if not load_config().embedded:
        info("skyhop uses an external Temporal; there is nothing to stop here.")
        return 0
    state = stop()
    info(
        "Stopped the embedded Temporal server and worker."
        if state
        else "The embedded server was not running."
    )
    return 0


async def run_server_codec(port: int, origins: list[str]) -> int:
    """Serve the codec server in the foreground until interrupted."""
    from skyhop.cli.codec_server import start_codec

    config = load_config()
    ui = [f"http://127.0.0.1:{config.ui_port}", f"http://localhost:{config.ui_port}"]
    server, url = await start_codec(config, port, [*ui, *origins])
    info(f"Codec server for {', '.join([*ui, *origins])}; endpoint (keep it private): {url}")
    async with server:
        await server.serve_forever()
    return 0
