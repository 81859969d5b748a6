"""``python -m cli`` is ``skyhop``."""

from skyhop.cli.app import main

main()
