"""A griffe extension for the API reference: sdsl's docstrings cross-reference in reStructuredText roles
(``:func:`~sdsl.speculation.step.price_step```), which Markdown would print as they are; each becomes a code
span of the name (the last dotted part with ``~``, the full path without). Loaded by mkdocs.yml."""

from __future__ import annotations

import re

import griffe

ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|data|attr|exc|obj|const):`(~?)([^`]+)`")


def _plain(match: re.Match) -> str:
    tilde, target = match.groups()
    name = target.rsplit(".", 1)[-1] if tilde else target
    return f"`{name}`"


class RstRoles(griffe.Extension):
    def on_instance(self, *, obj, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = ROLE.sub(_plain, obj.docstring.value)
