"""The evidence users re-run: each ``sdsl validate ...`` command and each VALIDATION.md section recomputed
from the measurements shipped in ``sdsl/data`` (held out where fitted), and the figure code behind
``sdsl figures``."""
