"""Research variants of sdsl's model that are not defaults (not installed; run from the repository root).

See research/README.md for what each module is, the VALIDATION.md claim it reproduces and its command.
"""
