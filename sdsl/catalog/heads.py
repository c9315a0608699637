"""Draft-head shapes: released heads' configs (``sdsl/data/heads.toml``): the config.json of EAGLE-3 heads trained for
mixture-of-experts targets, whose dense MLP is not the target's (on gpt-oss the target's ``intermediate_size``
is an expert's width, 2880, while its heads use 17280).

:func:`head_config` returns the catalogued shape of a (proposer kind, target) pair, or ``None``; proposers
(:mod:`sdsl.speculation.proposers`) then fall back to the target's attention shape with the target's d_ff on a dense
target and :data:`DEFAULT_MOE_HEAD_FF_RATIO` × d_model on an MoE target (:func:`dense_head_spec`); an MTP module's
block is the target's own layer (:func:`target_layer_spec`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from sdsl._io import load_shipped_toml
from sdsl._paths import data_path

__all__ = ["HeadConfig", "head_config", "head_configs", "dense_head_spec", "target_layer_spec",
           "DEFAULT_MOE_HEAD_FF_RATIO"]

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
    data = load_shipped_toml(data_path("heads.toml"))
    return tuple(HeadConfig(kind=kind, target=target, **fields) for kind, table in data.items()
                 for target, fields in table.items())


def head_config(kind: str, target) -> HeadConfig | None:
    """The catalogued ``kind`` head of ``target`` (a ModelSpec, matched by catalog name or Hugging Face id,
    or a catalog name), or ``None``."""
    names = {str(getattr(target, "name", target)).lower()}
    hf = getattr(target, "hf_id", None)
    if hf:
        from sdsl.catalog.models import list_models

        names |= {m.name for m in list_models() if m.hf_id and m.hf_id.lower() == hf.lower()}
    for head in head_configs():
        if head.kind == kind and head.target in names:
            return head
    return None


def dense_head_spec(target, layers: int, vocab: int, suffix: str, config=None):
    """A ``layers``-layer dense decoder at the target's width with an LM head over ``vocab``: the attention shape
    and MLP width of a released head's ``config`` (:func:`head_config`), else the target's
    attention shape and d_ff — on an MoE target, whose d_ff may be an expert's (gpt-oss: 2880), a dense MLP of
    :data:`DEFAULT_MOE_HEAD_FF_RATIO` × d_model."""
    from sdsl.catalog.models import ModelSpec
    from sdsl.errors import InvalidInputError

    if int(layers) < 1 or int(vocab) < 1:
        raise InvalidInputError(f"A {suffix} head needs at least one layer and a positive vocabulary.")
    if config is not None:
        shape = dict(n_head=config.num_attention_heads, n_kv_head=config.num_key_value_heads, head_dim=config.head_dim,
                     d_ff=config.intermediate_size, gated_mlp=True, norm="rmsnorm")
    else:
        d_ff = DEFAULT_MOE_HEAD_FF_RATIO * target.d_model if target.is_moe else target.d_ff
        shape = dict(n_head=target.n_head, n_kv_head=target.n_kv_head, head_dim=target.head_dim, d_ff=d_ff,
                     gated_mlp=target.gated_mlp, norm=target.norm)
    return ModelSpec(name=f"{target.name}-{suffix}", family=target.family, n_layer=int(layers), d_model=target.d_model,
                     vocab_size=int(vocab), max_context=target.max_context, **shape)


def target_layer_spec(target, layers: int, vocab: int, kind: str):
    """``layers`` copies of an MoE or MLA target's last layer (MoE when that layer is, MLA as the target has it;
    local attention only when every target layer is local) with an LM head over ``vocab``: the block of a
    DeepSeek-V3-style MTP module (arXiv 2412.19437 §2.2), whose checkpoints hold the full expert set."""
    from dataclasses import replace

    from sdsl.errors import InvalidInputError

    n = int(layers)
    if n < 1:
        raise InvalidInputError("An MTP proposer needs at least one layer.")
    last_is_moe = target.is_moe and target.n_layer - 1 >= target.first_dense_layers and (
        target.n_layer % target.moe_layer_step == 0)
    local = n if target.local_layers == target.n_layer else 0
    return replace(target, name=f"{target.name}-{kind}", n_layer=n, first_dense_layers=0 if last_is_moe else n,
                   moe_layer_step=1, local_layers=local, sliding_window=target.sliding_window if local else 0,
                   vocab_size=int(vocab), published_params=None,
                   published_active_params=None, mtp_layers=0, n_experts=target.n_experts if last_is_moe else 0,
                   experts_per_token=target.experts_per_token if last_is_moe else 0,
                   n_shared_experts=target.n_shared_experts if last_is_moe else 0,
                   expert_load=target.expert_load if last_is_moe else ())
