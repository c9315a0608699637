"""The configuration dataclasses say what each field is, with its unit, beside the field (nanoGPT's GPTConfig style)."""

from __future__ import annotations

import ast
import io
import tokenize
from dataclasses import fields
from pathlib import Path

import pytest

from sdsl.catalog.models import ModelSpec
from sdsl.engine.profiles import EngineProfile
from sdsl.roofline.latency_params import LatencyParams

ROOT = Path(__file__).resolve().parents[2]


def _commented_fields(cls, path: Path) -> set[str]:
    """Fields of ``cls`` whose line carries a trailing comment or follows a comment line."""
    text = path.read_text()
    comments = {tok.start[0] for tok in tokenize.generate_tokens(io.StringIO(text).readline) if tok.type == tokenize.COMMENT}
    node = next(n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.ClassDef) and n.name == cls.__name__)
    return {s.target.id for s in node.body if isinstance(s, ast.AnnAssign)
            and (s.lineno in comments or s.lineno - 1 in comments)}


@pytest.mark.parametrize("cls,path", [(LatencyParams, "sdsl/roofline/latency_params.py"),
                                      (ModelSpec, "sdsl/catalog/models.py"),
                                      (EngineProfile, "sdsl/engine/profiles.py")], ids=lambda v: getattr(v, "__name__", ""))
def test_every_field_has_a_comment(cls, path):
    assert {f.name for f in fields(cls)} - _commented_fields(cls, ROOT / path) == set()
