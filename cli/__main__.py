"""``python -m cli`` is ``skyhop``."""

from cli.app import main

main()
