"""How the CLI speaks: one-line errors on stderr, tables, ages and durations."""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import NoReturn

import typer

__all__ = ["EXIT_DETACHED", "EXIT_USAGE", "age", "duration", "exit_now", "fail", "info", "table"]

EXIT_USAGE = 2
"""Bad input: a task field, an override, a config value."""
EXIT_DETACHED = 130
"""Ctrl-C: the CLI let go, the work goes on."""


def fail(message: str, code: int = 1) -> NoReturn:
    """Print ``Error: message`` on stderr and exit with ``code``."""
    typer.secho(f"Error: {message}", fg=typer.colors.RED, err=True)
    raise typer.Exit(code)


def exit_now(code: int) -> NoReturn:
    """Flush and exit without interpreter finalization.

    Finalizing while the Temporal client's native threads are still alive can abort the process
    (``PyGILState_Release`` at exit), turning a clean exit into SIGABRT; skipping finalization also
    makes short commands faster.
    """
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def info(message: str) -> None:
    """A progress line on stderr, so stdout carries only job output and --json documents."""
    typer.echo(message, err=True)


def age(timestamp: float | None) -> str:
    """``5s ago``, ``3m ago``, ``2h ago``, ``4d ago``; ``-`` when unknown."""
    if not timestamp:
        return "-"
    return f"{duration(max(time.time() - timestamp, 0))} ago"


def duration(seconds: float | None) -> str:
    """``42s``, ``3m 5s``, ``2h 1m``, ``4d 2h``; ``-`` when unknown."""
    if seconds is None:
        return "-"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60}s"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60}m"
    return f"{s // 86400}d {s % 86400 // 3600}h"


def table(headers: list[str], rows: list[list[str]]) -> None:
    """A plain aligned table on stdout (no rich: listing must stay fast)."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = [headers, *rows]
    out = "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in lines
    )
    sys.stdout.write(out + "\n")
