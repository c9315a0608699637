"""Continuous draft-size families and the hardware-aware optimal draft size.

SDSL (Bozorgkhoo & Molybog, arXiv 2603.11053) picks the draft size N* that maximises the
FLOP-model speedup S*(α(N, M), c = N/M). Its stated limitation is that FLOPs ignore memory
bandwidth, batch size, KV cache and kernel overheads. sdsl's extension (docs/model.md §3.2–3.3): build a
family of draft shapes spanning a range of sizes, price every member with the roofline step time
(:func:`sdsl.speculation.throughput.predict`, best integer γ), keep α from SDSL's acceptance plane, and read off
the hardware-aware N* per batch size next to the FLOP-model N*.
"""

from __future__ import annotations

import numpy as np

from sdsl.catalog.models import ModelSpec, get_model
from sdsl.errors import InvalidInputError
from sdsl.speculation.optimum import best_speedup, gamma_star
from sdsl.acceptance.plane import CHINCHILLA, SDSL_PLANE, AcceptancePlane, LossLaw
from sdsl.plan.search import evaluate_grid

__all__ = ["llama_family", "draft_size_sweep", "best_drafts"]


def llama_family(vocab_size: int = 128256, d_models=None, *, max_context: int = 8192,
                 name: str = "draft") -> list[ModelSpec]:
    """Llama-3-shaped drafts of increasing size (one ModelSpec per ``d_model``, a multiple of 128).

    Shape rules follow Meta's Llama 3 / 3.2 configs (Llama-3.2-1B: d=2048, 16 layers; Llama-3.1-8B:
    d=4096, 32 layers): n_layer = d/128, grouped-query attention with 4 query heads per KV head
    (KV width d/4), SwiGLU d_ff = 3.5·d, tied embeddings. Head width 64 (32 when d/64 is not a
    multiple of 4, which leaves every GEMM shape and the KV width unchanged), so depth, widths and
    cost grow smoothly with d. ``d_models`` defaults to 128…4096 (≈ 17M to 7.5B parameters with
    Llama 3's 128k vocabulary).
    """
    if d_models is None:
        d_models = np.arange(128, 4097, 128)
    out = []
    for d in np.atleast_1d(np.asarray(d_models, dtype=int)):
        d = int(d)
        if d < 128 or d % 128:
            raise InvalidInputError(f"Draft width d_model must be a positive multiple of 128; got {d}.")
        head_dim = 64 if d % 256 == 0 else 32
        n_head = d // head_dim
        out.append(ModelSpec(
            name=f"{name}-d{d}", family="llama", n_layer=d // 128, d_model=d, n_head=n_head,
            n_kv_head=n_head // 4, d_ff=7 * d // 2, vocab_size=int(vocab_size), gated_mlp=True,
            tied_embeddings=True, max_context=max_context, head_dim=head_dim,
            source="synthetic Llama-3-shaped draft (sdsl.plan.families.llama_family)",
        ))
    return out


def draft_size_sweep(target, deployment, *, drafts=None, batch=(1, 8, 32), gammas=range(0, 11),
                     draft_tokens=1e12, target_tokens=1e12, law: LossLaw = CHINCHILLA,
                     plane: AcceptancePlane = SDSL_PLANE):
    """Price every draft of a family (default: :func:`llama_family` with the target's vocabulary)
    against ``target`` on ``deployment`` (a :class:`~sdsl.roofline.deployment.Deployment` or a hardware
    name/file/Hardware) for each batch size, at its best integer γ.

    α comes from SDSL's plane for each (draft, target) size pair (clipped to (0, 1) with a warning
    if the plane leaves it). Returns a pandas DataFrame, one row per (draft, batch), columns:
    draft, draft_params, batch, alpha, gamma (best integer, hardware model), speedup (hardware
    model), tokens_per_s, plain_tokens_per_s, cost_ratio (measured-time c at that γ), flop_gamma
    (continuous γ* with c = N/M), flop_speedup (S* with c = N/M, SDSL's FLOP model).
    """
    import pandas as pd

    target = get_model(target) if not isinstance(target, ModelSpec) else target
    drafts = llama_family(target.vocab_size) if drafts is None else [get_model(d) for d in drafts]
    grid = evaluate_grid(target, deployment, drafts=drafts, gammas=gammas, batch=batch, draft_tokens=draft_tokens,
                         target_tokens=target_tokens, law=law, plane=plane)
    best = {k: v[:, :, 0] for k, v in grid.best_arrays().items()}  # (draft, batch): one α per draft
    n = np.array([d.total_params for d in drafts], dtype=float)
    alpha = best["alpha"][:, 0]
    c_flop = n / float(target.total_params)
    di, bi = (i.ravel() for i in np.indices(best["gamma"].shape))
    return pd.DataFrame({
        "draft": np.array([d.name for d in drafts])[di], "draft_params": n[di], "batch": grid.batches[bi].astype(int),
        "alpha": alpha[di], "gamma": best["gamma"].ravel(),
        **{k: best[k].ravel() for k in ("speedup", "tokens_per_s", "plain_tokens_per_s", "cost_ratio")},
        "flop_gamma": gamma_star(alpha, c_flop)[di], "flop_speedup": best_speedup(alpha, c_flop)[di],
    })


def best_drafts(sweep) -> "object":
    """Per batch size, the hardware-aware best draft of a :func:`draft_size_sweep` frame and the
    FLOP-model best draft of the same family (SDSL's N*, arXiv 2603.11053; docs/model.md §3.2), as a pandas
    DataFrame with one row per batch."""
    import pandas as pd

    rows = []
    for b, grp in sweep.groupby("batch", sort=True):
        hw = grp.loc[grp["speedup"].idxmax()]
        fl = grp.loc[grp["flop_speedup"].idxmax()]
        rows.append({"batch": int(b), "hw_draft": hw["draft"], "hw_n_star": float(hw["draft_params"]),
                     "hw_gamma": int(hw["gamma"]), "hw_speedup": float(hw["speedup"]),
                     "hw_tokens_per_s": float(hw["tokens_per_s"]), "flop_draft": fl["draft"],
                     "flop_n_star": float(fl["draft_params"]), "flop_speedup": float(fl["flop_speedup"]),
                     "hw_speedup_at_flop_draft": float(fl["speedup"])})
    return pd.DataFrame(rows)
