"""Where the Temporal SDK's own log goes while a CLI command runs: never onto stdout.

The SDK's native core writes its warnings (a gRPC call retried while the server is down, say) to
the console with colour codes, and stdout is where a job's output and ``--json`` documents go.
The CLI forwards them to Python logging instead: every record lands in ``<skyhop home>/cli.log``,
and the first warning of a command says, once and plainly on stderr, what is going on.
"""

from __future__ import annotations

import logging
import sys

from skyhop.providers.home import skyhop_home

__all__ = ["OUTAGE_NOTICE", "log_path", "route_sdk_logs"]

OUTAGE_NOTICE = "lost contact with Temporal, retrying..."
_CORE = "temporalio.core"
"""The logger the native core's records are forwarded to (its targets become child loggers)."""


def log_path() -> str:
    """The file the SDK's records go to."""
    return str(skyhop_home() / "cli.log")


class _NoticeOnce(logging.Handler):
    """Writes ``OUTAGE_NOTICE`` (and where the details are) on stderr for the first warning only."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.said = False

    def emit(self, record: logging.LogRecord) -> None:
        if not self.said and record.name.startswith(_CORE):  # the native client's retries
            self.said = True
            sys.stderr.write(f"{OUTAGE_NOTICE} (details: {log_path()})\n")
            sys.stderr.flush()


def route_sdk_logs() -> None:
    """Send the SDK's log (native core and Python side) to the log file; call before any client exists."""
    from temporalio.runtime import (
        LogForwardingConfig,
        LoggingConfig,
        Runtime,
        TelemetryConfig,
        TelemetryFilter,
    )

    logger = logging.getLogger("temporalio")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        skyhop_home().mkdir(parents=True, exist_ok=True)
        to_file: logging.Handler = logging.FileHandler(log_path())
        to_file.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logger.addHandler(to_file)
    except OSError:  # an unwritable home must not stop the command; the notice still shows
        pass
    logger.addHandler(_NoticeOnce())
    logging_config = LoggingConfig(
        filter=TelemetryFilter(core_level="WARN", other_level="ERROR"),
        forwarding=LogForwardingConfig(logger=logging.getLogger(_CORE)),
    )
    Runtime.set_default(
        Runtime(telemetry=TelemetryConfig(logging=logging_config)), error_if_already_set=False
    )
