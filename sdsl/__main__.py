"""``python -m sdsl``."""

from .cli import main

main()
