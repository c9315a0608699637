"""``python -m sdsl``."""

from sdsl.cli import main

main()
