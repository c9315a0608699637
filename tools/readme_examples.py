"""Run the README's worked examples and write their real output into README.md.

Each example is a block

    <!-- example: sdsl optimize --target llama-3.1-8b ... | lines=20 -->
    ```text
    ...output...
    ```
    <!-- example:end -->

The command after ``example:`` runs through the CLI in-process (``sdsl`` stripped); ``from=TEXT`` starts the
shown output at the first line containing TEXT and ``lines=N`` keeps N lines from there (the README shows
each cut with ``...``).

    .venv/bin/python tools/readme_examples.py          # rewrite the outputs in README.md
    .venv/bin/python tools/readme_examples.py --check  # exit 1 if an output is stale (tests do this)
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

from cli_text import run_sdsl  # tools/ is this script's directory

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"(<!-- example: (?P<cmd>.*?)(?: \| from=(?P<start>[^|]*?))?(?: \| lines=(?P<lines>\d+))? -->\n)"
                   r"(?P<body>.*?)(?P<end><!-- example:end -->)", re.S)


def output(command: str, lines: int | None, start: str | None = None) -> str:
    args = shlex.split(command)
    if args[0] != "sdsl":
        raise SystemExit(f"example command must start with sdsl: {command!r}")
    text = run_sdsl(args[1:]).splitlines()
    if start:
        first = next((i for i, line in enumerate(text) if start in line), None)
        if first is None:
            raise SystemExit(f"example `{command}`: no output line contains {start!r}")
        text = (["..."] if first else []) + text[first:]
    if lines is not None and len(text) > lines:
        text = text[:lines] + ["..."]
    return "\n".join(text)


def render(readme: str) -> str:
    def block(m: re.Match) -> str:
        lines = int(m["lines"]) if m["lines"] else None
        return f"{m.group(1)}```text\n$ {m['cmd']}\n{output(m['cmd'], lines, m['start'])}\n```\n{m['end']}"

    return BLOCK.sub(block, readme)


def main() -> int:
    path = ROOT / "README.md"
    old = path.read_text()
    new = render(old)
    if "--check" in sys.argv:
        return 0 if new == old else 1
    path.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
