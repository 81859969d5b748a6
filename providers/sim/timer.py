"""A sim instance's preemption timer, once its ``sleep`` is over: ``python -m skyhop.providers.sim.timer
ROOT INSTANCE_ID`` preempts the instance under its cluster's lock (see ``SimCloud.fire``) and ends."""

from __future__ import annotations

import sys
from pathlib import Path

from skyhop.providers.sim.cloud import SimCloud


def main(argv: list[str]) -> int:
    root, instance_id = argv[1], argv[2]
    SimCloud(Path(root)).fire(instance_id)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
