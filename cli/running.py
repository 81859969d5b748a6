"""Running a command's coroutine: Ctrl-C and known errors become one line and an exit code.

Its own module so that every command module can use it without importing ``cli.app`` (which
imports them all).
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Coroutine
from typing import Any, NoReturn

import typer

from skyhop.cli.output import EXIT_DETACHED, EXIT_USAGE, exit_now, fail, info

__all__ = ["run_command", "run_interruptible"]


def run_command(coro: Coroutine[Any, Any, int]) -> NoReturn:
    """Run a command's coroutine; turn known errors into one line and an exit code."""
    from skyhop.cli.sdk_logs import route_sdk_logs

    route_sdk_logs()
    try:
        try:
            code = run_interruptible(coro)
        except KeyboardInterrupt:
            info("\nInterrupted.")
            code = EXIT_DETACHED
        except typer.Exit:
            raise
        except Exception as exc:
            _fail_known(exc)
            raise
    except typer.Exit as exc:
        code = exc.exit_code
    exit_now(code)


def _fail_known(exc: Exception) -> None:
    """Say ``exc`` in one line and exit, if it is an error a user can act on; return otherwise.

    The error types are imported here, once a command failed: their modules load the task model,
    the providers and the log store, and a command that succeeds (``jobs queue``) needs none of
    them (about 0.15 s of every command's start)."""
    from temporalio.exceptions import ApplicationError
    from temporalio.service import RPCError

    from skyhop.cli.config import ConfigError
    from skyhop.cli.embedded import ServerError
    from skyhop.cli.logs import JobNotFoundError, LaunchFailedError
    from skyhop.cli.pools import PoolNotFoundError
    from skyhop.cli.serving import ServiceNotFoundError
    from skyhop.spec import SpecError

    if isinstance(exc, SpecError | ConfigError):
        fail(str(exc), EXIT_USAGE)
    if isinstance(
        exc, ServerError | JobNotFoundError | LaunchFailedError | ServiceNotFoundError | PoolNotFoundError
    ):
        fail(str(exc))
    if isinstance(exc, ApplicationError):  # e.g. a reply not signed with this key (UnauthenticatedPayload)
        fail(exc.message)
    if isinstance(exc, RPCError):  # e.g. the server is overloaded or refuses the namespace
        fail(f"Temporal refused the request ({exc.status.name if exc.status else 'error'}): {exc.message}")


def run_interruptible(coro: Coroutine[Any, Any, int]) -> int:
    """Run the coroutine; Ctrl-C cancels it, and however it then ends is ``KeyboardInterrupt``.

    ``asyncio.run`` cancels the main task on Ctrl-C too, but turns only a ``CancelledError`` back
    into ``KeyboardInterrupt``, and the Temporal client turns the cancellation of a call in flight
    into errors of its own (``WorkflowUpdateRPCTimeoutOrCancelledError``), which would surface as a
    traceback. A command that handles the cancellation itself (``launch`` detaching) still returns
    its own exit code.
    """
    loop = asyncio.new_event_loop()
    task = loop.create_task(coro)
    interrupted = False

    def interrupt() -> None:
        nonlocal interrupted
        if interrupted:  # a second Ctrl-C while the first is being handled: stop at once
            raise KeyboardInterrupt
        interrupted = True
        task.cancel()

    listening = signal.getsignal(signal.SIGINT) != signal.SIG_IGN  # under nohup, Ctrl-C stays ignored
    if listening:
        loop.add_signal_handler(signal.SIGINT, interrupt)
    try:
        return loop.run_until_complete(task)
    except (Exception, asyncio.CancelledError):
        if interrupted:
            raise KeyboardInterrupt from None
        raise
    finally:
        if listening:
            loop.remove_signal_handler(signal.SIGINT)
