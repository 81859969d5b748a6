"""How the CLI speaks: one-line errors on stderr, tables, ages and durations."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from typing import Any, NoReturn

import typer

__all__ = [
    "EXIT_DETACHED",
    "EXIT_USAGE",
    "Ticker",
    "age",
    "duration",
    "exit_now",
    "fail",
    "info",
    "print_json",
    "table",
]

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


def print_json(kind: str, items: list[Any], **fields: Any) -> None:
    """The one layout of every ``--json``: ``{"kind": KIND, "items": [...]}`` on stdout.

    Scripts read ``items`` the same way whatever the command; ``kind`` says what an item is
    (``clusters``, ``jobs``, ``plan``, ``gpus``, ``providers``), and a kind may add summary fields
    next to them (a plan's totals). Field names are snake_case; times are Unix seconds (``*_at``).
    """
    sys.stdout.write(json.dumps({"kind": kind, "items": items, **fields}, indent=2) + "\n")


class Ticker:
    """A spinner and the elapsed time, redrawn in place on the terminal's last line (stderr).

    The line is transient: ``clear`` erases it before anything else is printed, and once the work
    it times is over, so no fragment of it is left in front of the next line. Off a terminal it
    draws nothing.
    """

    FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
    FRAME_S = 0.1

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.started = time.monotonic()
        self.shown = False

    def tick(self) -> None:
        """Redraw the line: the frame follows the clock, so it turns however often this is called."""
        if not self.enabled:
            return
        elapsed = time.monotonic() - self.started
        frame = self.FRAMES[int(elapsed / self.FRAME_S) % len(self.FRAMES)]
        sys.stderr.write(f"\r\033[K{frame} {elapsed:5.1f}s")
        sys.stderr.flush()
        self.shown = True

    def clear(self) -> None:
        """Erase the line, if it is drawn."""
        if self.shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
            self.shown = False
