"""Released draft-head shapes (``sdsl/data/heads.toml``): the config.json of EAGLE-3 heads trained for
mixture-of-experts targets, whose dense MLP is not the target's (on gpt-oss the target's ``intermediate_size``
is an expert's width, 2880, while its heads use 17280).

:func:`head_config` returns the catalogued shape of a (proposer kind, target) pair, or ``None``; proposers
(:mod:`sdsl.core.proposers`) then fall back to the target's attention shape with the target's d_ff on a dense
target and :data:`DEFAULT_MOE_HEAD_FF_RATIO` × d_model on an MoE target.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from sdsl._io import load_toml
from sdsl._paths import data_path

__all__ = ["HeadConfig", "head_config", "head_configs", "DEFAULT_MOE_HEAD_FF_RATIO"]

#: d_ff / d_model of a dense draft layer on an MoE target without a catalogued head: the ratio SpecForge's
#: EAGLE-3 configs use for Qwen3-30B-A3B (12288/2048), Qwen3-235B-A22B (24576/4096) and gpt-oss-20b/120b
#: (17280/2880), all exactly 6; its Llama-4-Scout (32768/5120 = 6.4) and DeepSeek-V3 (40960/7168 = 5.7) configs
#: bracket it (sdsl/data/heads.toml).
DEFAULT_MOE_HEAD_FF_RATIO = 6


@dataclass(frozen=True)
class HeadConfig:
    """One released head's shape (its config.json fields) and where it was read."""

    kind: str
    target: str
    hidden_size: int
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    num_hidden_layers: int
    draft_vocab_size: int
    source: str
    quote: str
    head_dim: int | None = None

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@lru_cache(maxsize=1)
def head_configs() -> tuple[HeadConfig, ...]:
    """Every catalogued head, in file order."""
    data = load_toml(data_path("heads.toml"))
    return tuple(HeadConfig(kind=kind, target=target, **fields) for kind, table in data.items()
                 for target, fields in table.items())


def head_config(kind: str, target) -> HeadConfig | None:
    """The catalogued ``kind`` head of ``target`` (a ModelSpec, matched by catalog name or Hugging Face id,
    or a catalog name), or ``None``."""
    names = {str(getattr(target, "name", target)).lower()}
    hf = getattr(target, "hf_id", None)
    if hf:
        from sdsl.core.architecture import list_models

        names |= {m.name for m in list_models() if m.hf_id and m.hf_id.lower() == hf.lower()}
    for head in head_configs():
        if head.kind == kind and head.target in names:
            return head
    return None
