"""Runs whose runners exit, told by the kernel: a watch hub need not ask 10,000 idle runs a second.

A job on a node in this process (``NodeRuntime.in_process``: ``local``, ``sim``) can end only by its
runner's exit: the runner writes the end record, then exits, and a killed runner (a preempted
node) ends its job too. So once every node of a run reports its runner, the hub holds a pidfd per
runner (readable once the process exits, ``pidfd_open(2)``) in its event loop instead of reading
the run's state every cycle, and asks the run's nodes as soon as one fires. A run asked without a
pidfd (starting, a remote node, the budget spent) is asked every cycle, as before.

The pidfds take file descriptors from the worker's limit: together they never hold more than
``_BUDGET_SHARE`` of it (a worker that could not open a state file or a socket would be worse off
than one that polls).
"""

from __future__ import annotations

import asyncio
import os
import resource

__all__ = ["RunnerExits"]

_BUDGET_SHARE = 0.5
"""Of the soft limit on open files, the most that all pidfds of the process hold."""


class _Budget:
    """The process's pidfds, counted against ``_BUDGET_SHARE`` of its open-file limit."""

    def __init__(self) -> None:
        self.open = 0

    def take(self, count: int) -> bool:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        limit = soft * _BUDGET_SHARE if soft != resource.RLIM_INFINITY else float("inf")
        if self.open + count > limit:
            return False
        self.open += count
        return True

    def give(self, count: int) -> None:
        self.open -= count


_budget = _Budget()


class RunnerExits:
    """The pidfds of the runs a hub followed to a running runner, and which of them fired since."""

    def __init__(self) -> None:
        self._fds: dict[str, list[int]] = {}
        self._fired: set[str] = set()
        self._woken = asyncio.Event()

    def arm(self, key: str, pids: list[int]) -> bool:
        """Be told when any of ``pids`` exits; False (nothing held) if one cannot be opened: it
        exited already, the budget is spent, or the kernel has no pidfds (before Linux 5.3, or
        not Linux). The caller asks the run's nodes every cycle then."""
        self.disarm(key)
        if not pids or not hasattr(os, "pidfd_open") or not _budget.take(len(pids)):
            return False
        fds: list[int] = []
        try:
            for pid in pids:
                fds.append(os.pidfd_open(pid))
        except OSError:
            _close(fds)
            _budget.give(len(pids))
            return False
        loop = asyncio.get_running_loop()
        for fd in fds:
            loop.add_reader(fd, self._fire, key)
        self._fds[key] = fds
        return True

    def armed(self, key: str) -> bool:
        """Whether the run's runners are held and none has exited since."""
        return key in self._fds and key not in self._fired

    def disarm(self, key: str) -> None:
        """Let go of the run's pidfds (it ended, was forgotten, or is armed again)."""
        self._fired.discard(key)
        fds = self._fds.pop(key, None)
        if fds is None:
            return
        loop = asyncio.get_running_loop()
        for fd in fds:
            loop.remove_reader(fd)
        _close(fds)
        _budget.give(len(fds))

    def fired(self) -> list[str]:
        """The runs one of whose runners exited since the last call (each told once)."""
        fired = sorted(self._fired)
        self._woken.clear()
        for key in fired:
            self.disarm(key)
        return fired

    def wake(self) -> None:
        """End a ``wait`` with no runner's exit (the hub has something new to follow)."""
        self._woken.set()

    async def wait(self, timeout: float) -> bool:
        """Until a runner exits (or ``wake``): True; or ``timeout`` seconds: False."""
        try:
            async with asyncio.timeout(timeout):
                await self._woken.wait()
        except TimeoutError:
            return False
        return True

    def close(self) -> None:
        for key in list(self._fds):
            self.disarm(key)

    def _fire(self, key: str) -> None:
        # Readable stays readable: one wake-up per run, until it is disarmed or armed again.
        for fd in self._fds.get(key, []):
            asyncio.get_running_loop().remove_reader(fd)
        self._fired.add(key)
        self._woken.set()


def _close(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)
