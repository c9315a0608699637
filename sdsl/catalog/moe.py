"""Routing math of mixture-of-experts layers: how many distinct experts a batch touches, and how many rows
each touched expert's GEMM computes (numpy only; docs/model.md §3.8).

A token's router picks ``k`` of ``E`` experts (top-k gating; Shazeer et al., ICLR 2017; Fedus et al., JMLR
2022). When ``n`` tokens are routed in one forward — in a speculative step n = batch × verified tokens —
the layer reads the weights of every expert at least one token picked. With each token picking expert i
with probability π_i (Σ π_i = k, π_i ≤ 1) independently of the others,

    E[distinct experts] = Σ_i 1 − (1 − π_i)^n,

which for a uniform router (π_i = k/E) is E·(1 − (1 − k/E)^n). Tokens of different sequences route
independently; consecutive positions of one sequence do not: a position keeps a share ρ of its predecessor's
experts beyond chance (local routing consistency: Liang et al. 2025, arXiv 2505.16056), so the q positions a
speculative step verifies per sequence touch the experts of 1 + (q − 1)·(1 − ρ) independent tokens
(:func:`locality_tokens`; ρ from a router measurement, :data:`ROUTING_LOCALITY`). A skewed router is given as a
measured expert-load histogram (the share of token-expert assignments each expert receives) or a
rank power law h_i ∝ i^(−α) (Zipf-like popularity; ai-dynamo/aiconfigurator's MoE collector instead draws
each expert's load from a power-law density with α = 1.01 or 1.2, collector/helper.py ``sample_power_law``,
so its exponents are not this α); either becomes π = k·h, capped at 1 (a token picks an expert at most
once) with the excess spread over the others in proportion.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from sdsl.errors import InvalidInputError

__all__ = ["expected_distinct_experts", "locality_tokens", "locality_from_overlap", "ROUTING_LOCALITY",
           "LOCALITY_EVIDENCE", "selection_probabilities", "distinct_experts_from_probabilities",
           "expected_expert_rows", "FusedMoEFit", "TRITON_ROW_TILES", "row_tile_of", "fused_moe_layer_time", "MEASURED_MOE_GPUS",
           "MOE_TABLE_DTYPES", "DEFAULT_MOE_ENGINES", "ENGINE_MOE_KERNELS", "fused_moe_fits", "select_fused_moe_fit", "fused_moe_provenance"]


def _check_router(n_experts, top_k):
    E = np.asarray(n_experts, dtype=float)
    k = np.asarray(top_k, dtype=float)
    if np.any(E < 1) or np.any(k < 1) or np.any(k > E):
        raise InvalidInputError("A router needs 1 <= experts per token <= experts.")
    return E, k


def expected_distinct_experts(n_experts, top_k, tokens) -> np.ndarray:
    """Expected distinct experts ``tokens`` tokens touch when each picks ``top_k`` of ``n_experts`` uniformly:
    E·(1 − (1 − k/E)^n) (each expert is missed by one token with probability 1 − k/E). Broadcasts; 0 tokens
    touch 0 experts, k = E touches all of them."""
    E, k = _check_router(n_experts, top_k)
    n = np.asarray(tokens, dtype=float)
    if np.any(n < 0):
        raise InvalidInputError("The number of routed tokens must be non-negative.")
    with np.errstate(divide="ignore", invalid="ignore"):
        missed = np.where(k >= E, np.where(n > 0, 0.0, 1.0), np.exp(n * np.log1p(-k / E)))
    return E * (1.0 - missed)


def selection_probabilities(n_experts: int, top_k: int, *, load=None, skew: float = 0.0) -> np.ndarray:
    """Probability π_i that one token picks expert i (Σ π = k, each at most 1), from a measured expert-load
    histogram ``load`` (any non-negative weights, one per expert: the share of assignments each receives) or
    a power-law popularity h_i ∝ i^(−skew) (``skew`` 0: uniform). Shares that would exceed 1 are capped and
    the excess spread over the other experts in proportion to their shares."""
    E, k = int(n_experts), int(top_k)
    _check_router(E, k)
    if load is not None:
        h = np.asarray(load, dtype=float).ravel()
        if h.size != E or np.any(~np.isfinite(h)) or np.any(h < 0) or h.sum() <= 0:
            raise InvalidInputError(f"An expert-load histogram needs {E} non-negative shares, not all zero.")
        if np.count_nonzero(h) < k:
            raise InvalidInputError(f"An expert-load histogram needs at least {k} experts with a positive share.")
    else:
        if not (np.isfinite(skew) and skew >= 0):
            raise InvalidInputError("The routing skew (a power-law exponent) must be a non-negative number.")
        h = np.arange(1, E + 1, dtype=float) ** (-float(skew))
    p = k * h / h.sum()
    capped = np.zeros(E, dtype=bool)
    for _ in range(E):  # water-filling over at most E experts (a model's size, not a configuration loop)
        over = (p > 1.0) & ~capped
        if not over.any():
            break
        capped |= over
        free = ~capped
        p[capped] = 1.0
        p[free] = h[free] * (k - capped.sum()) / h[free].sum()
    return np.minimum(p, 1.0)


def distinct_experts_from_probabilities(probabilities, tokens) -> np.ndarray:
    """Σ_i 1 − (1 − π_i)^n over the last axis of ``probabilities`` (zeros pad a shorter expert list), with
    ``tokens`` broadcasting against the leading axes."""
    p = np.asarray(probabilities, dtype=float)
    n = np.asarray(tokens, dtype=float)[..., None]
    return np.sum(_touched(p, n), axis=-1)


def _touched(p, n) -> np.ndarray:
    """P(at least one of n tokens picks an expert picked with probability p) = 1 − (1 − p)^n."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(p >= 1.0, np.where(n > 0, 1.0, 0.0), -np.expm1(n * np.log1p(-np.minimum(p, 1.0 - 1e-16))))


def locality_from_overlap(shared_share, n_experts, top_k) -> float:
    """The routing locality ρ of :func:`locality_tokens` from a measured overlap: two consecutive positions that
    share a fraction ``shared_share`` (s) of their top-k experts touch k·(2 − s) of them, so ρ solves
    E·(1 − (1 − k/E)^(2 − ρ)) = k·(2 − s); s at the chance value k/E (independent routing) gives ρ ≈ 0."""
    E, k = _check_router(n_experts, top_k)
    s = float(shared_share)
    if not (np.isfinite(s) and float(k / E) <= s < 1.0):
        raise InvalidInputError("A measured expert overlap must lie between the chance value k/E and 1.")
    p = float(k / E)
    return float(max(2.0 - np.log1p(-p * (2.0 - s)) / np.log1p(-p), 0.0))


#: The measurement the default locality comes from (sdsl/data/published/moe_routing.csv): GLM-4.7-Flash's router
#: instrumented over greedy decode, 64 routed experts, top-4, every MoE layer.
LOCALITY_EVIDENCE = {
    "model": "zai-org/GLM-4.7-Flash", "n_experts": 64, "top_k": 4, "shared_share": 0.257,
    "source": "github-pr:ml-explore/mlx-lm#1485 (comment by samithaj, 2026-07-26)",
    "quote": "consecutive decode positions share **25.7%** of their top-4 experts (chance would be 4/64 = 6.25%)"}
#: ρ of every MoE model without a measured value of its own (ModelSpec.routing_locality): 0.213.
ROUTING_LOCALITY = locality_from_overlap(LOCALITY_EVIDENCE["shared_share"], LOCALITY_EVIDENCE["n_experts"],
                                         LOCALITY_EVIDENCE["top_k"])


def locality_tokens(tokens, sequences=None, locality=0.0) -> np.ndarray:
    """Independent tokens ``tokens`` routed tokens count as for the experts they touch when they are
    ``sequences`` sequences of q = tokens / sequences consecutive positions each (a speculative step verifies q
    per sequence) and a position keeps a share ``locality`` (ρ) of its predecessor's experts beyond chance:
    b·(1 + (q − 1)·(1 − ρ)). ``sequences`` None or ρ 0: the tokens themselves (independent routing)."""
    n = np.asarray(tokens, dtype=float)
    if sequences is None:
        return n
    rho = np.asarray(locality, dtype=float)
    if np.any(~np.isfinite(rho)) or np.any(rho < 0) or np.any(rho >= 1):
        raise InvalidInputError("A routing locality must lie in [0, 1).")
    b = np.asarray(sequences, dtype=float)
    return np.where(b > 0, np.minimum(b + (n - b) * (1.0 - rho), n), n)


def expected_expert_rows(tokens, *, n_experts=None, top_k=None, probabilities=None, pad=None, distinct_tokens=None):
    """(distinct experts, GEMM rows) of one MoE layer for ``tokens`` routed tokens: the expected number of
    experts touched and Σ over them of ``pad``(their token count) — the rows a grouped GEMM computes when it
    tiles each expert's tokens separately (vLLM ``moe_align_block_size`` pads every expert's count to the
    kernel's row block). Uniform routing (``n_experts``, ``top_k``): D·pad(n·k/D). A routing distribution
    (``probabilities``, last axis): Σ_i P_i·pad(n·π_i/P_i), each touched expert at its expected count given
    that it is touched (P_i = 1 − (1 − π_i)^n). ``pad`` None: rows = n·k, no padding. ``distinct_tokens``: the
    independent tokens the experts touched are counted from (:func:`locality_tokens`; default ``tokens``), while the
    rows are every routed pick. Broadcasts."""
    n = np.asarray(tokens, dtype=float)
    nd = n if distinct_tokens is None else np.asarray(distinct_tokens, dtype=float)
    pad = pad or (lambda rows: rows)
    if probabilities is None:
        distinct = expected_distinct_experts(n_experts, top_k, nd)
        with np.errstate(divide="ignore", invalid="ignore"):
            per_expert = np.where(distinct > 0, n * np.asarray(top_k, dtype=float) / distinct, 0.0)
        return distinct, np.where(distinct > 0, distinct * pad(np.maximum(per_expert, 1.0)), 0.0)
    p = np.asarray(probabilities, dtype=float)
    nn = n[..., None]
    touched = _touched(p, nd[..., None])
    with np.errstate(divide="ignore", invalid="ignore"):
        per_expert = np.where(touched > 0, nn * p / touched, 0.0)
    rows = np.where(touched > 0, touched * pad(np.maximum(per_expert, 1.0)), 0.0)
    return np.sum(touched, axis=-1), np.sum(rows, axis=-1)


# ---------------------------------------------------------------------------------------------------------------
# The fused MoE layer as one measured kernel (NVIDIA aiconfigurator-core 0.12.0's moe_perf tables, Apache-2.0;
# fitted by sdsl.fit.opdb.moe, parameters shipped in sdsl/data/moe/fused_moe.json).
# ---------------------------------------------------------------------------------------------------------------

#: Row tile of the Triton fused-MoE kernel's default configuration (vLLM/SGLang ``get_default_config``:
#: ``BLOCK_SIZE_M`` 16 while the tokens M <= the experts E of the layer, else 64); each expert's rows are padded
#: to it (``moe_align_block_size``). Kernels of other families (CUTLASS, TensorRT-LLM, FlashInfer) tile each
#: expert's rows on their own schedule: no padding term.
TRITON_ROW_TILES = (16, 64)


@dataclass(frozen=True)
class FusedMoEFit:
    """Fitted terms of one fused MoE kernel on one GPU (:func:`fused_moe_layer_time`): a fixed floor ``t0_s``
    (the layer's launches: routing, alignment, two grouped GEMMs, activation, sum), ``per_expert_s`` for every
    local expert the tokens touch, the weight reads of those experts at ``eta_memory`` of the GPU's bandwidth,
    the FLOPs of their padded rows at ``eta_compute`` of the tensor-core peak, and ``per_pair_s`` per routed
    (token, expert) pair over all tokens (every GPU sorts and permutes every pick). ``row_tile`` "triton" pads
    rows to :data:`TRITON_ROW_TILES`, "none" does not. ``loso`` is its leave-one-model-shape-out error.
    ``l2_speedup`` s prices the tables' rows whose touched experts fit in L2 (read 1/s as long: the tables time them
    L2-hot, :mod:`sdsl.fit.opdb.collection`); a step reads its experts from DRAM and never takes it."""

    gpu: str
    engine: str
    kernel_source: str
    dtype: str
    t0_s: float
    per_expert_s: float
    eta_memory: float
    eta_compute: float
    per_pair_s: float
    row_tile: str = "none"
    versions: tuple = ()
    rows: int = 0
    shapes: int = 0
    loso: dict = field(default_factory=dict)
    l2_speedup: float = 1.0


def row_tile_of(fit: FusedMoEFit, tokens, local_experts) -> np.ndarray:
    """The row tile each expert's rows are padded to: Triton's default 16 while tokens <= local experts, else 64;
    1 (no padding) for other kernels."""
    n = np.asarray(tokens, dtype=float)
    if fit.row_tile != "triton":
        return np.ones_like(n)
    small, large = TRITON_ROW_TILES
    return np.where(n <= np.asarray(local_experts, dtype=float), float(small), float(large))


def fused_moe_layer_time(fit: FusedMoEFit, *, tokens, top_k, local_experts_touched, padded_rows, weight_bytes,
                         flops_per_row, bandwidth, peak) -> np.ndarray:
    """Seconds of one fused MoE layer on one GPU (measured form, fitted on aiconfigurator-core's moe_perf tables):

        t = t0 + c_e·D + W/(η_m·BW) + 2·R_pad·(h·(n_up + 1)·i)/(η_c·peak) + c_p·n·k

    D: distinct local experts the ``tokens`` touch (:func:`expected_distinct_experts`, / ep), W their weight bytes,
    R_pad their rows, each expert's padded to :func:`row_tile_of` (``flops_per_row`` = 2·h·(up + down widths)),
    n·k the routed pairs. Memory and compute are added, not overlapped: in the skinny grouped GEMMs of decode each
    tile's weight load and its MMAs run back to back (the tables fit the sum better than the maximum)."""
    D = np.asarray(local_experts_touched, dtype=float)
    pairs = np.asarray(tokens, dtype=float) * np.asarray(top_k, dtype=float)
    t = (fit.t0_s + fit.per_expert_s * D + np.asarray(weight_bytes, dtype=float) / (fit.eta_memory * bandwidth)
         + np.asarray(padded_rows, dtype=float) * flops_per_row / (fit.eta_compute * peak) + fit.per_pair_s * pairs)
    return np.where(D > 0, t, 0.0)


#: sdsl's hardware catalog names of the GPUs whose fused MoE layer is measured (operator database names).
MEASURED_MOE_GPUS = {"h100-sxm": "h100_sxm", "h200": "h200_sxm", "b200": "b200_sxm", "a100-80gb": "a100_sxm", "l40s": "l40s",
                     "b300": "b300_sxm", "gb200": "gb200", "gb300": "gb300", "rtx-pro-6000": "rtx_pro_6000_server"}
#: sdsl weight format -> the tables' moe_dtype, in order of preference (sdsl's fp8 is 128×128 block-scaled).
MOE_TABLE_DTYPES = {"bf16": ("bfloat16",), "fp16": ("bfloat16",), "fp8": ("fp8_block", "fp8"), "int4": ("int4_wo",),
                    "mxfp4": ("w4a16_mxfp4", "w4a8_mxfp4_mxfp8"), "nvfp4": ("nvfp4",)}
#: The kernels an engine without measured tables (the roofline alone, research harnesses) is priced with.
DEFAULT_MOE_ENGINES = ("vllm", "sglang", "trtllm")


@lru_cache(maxsize=1)
def fused_moe_fits() -> tuple[FusedMoEFit, ...]:
    """The shipped fits (sdsl/data/moe/fused_moe.json, written by ``python -m sdsl.fit.opdb.moe --write``)."""
    from importlib import resources

    from sdsl._io import load_json

    path = resources.files("sdsl") / "data" / "moe" / "fused_moe.json"
    if not path.is_file():
        return ()
    return tuple(FusedMoEFit(**{**f, "versions": tuple(f["versions"])}) for f in load_json(path)["fits"])


def _engine_family(engine) -> str | None:
    family = getattr(engine, "engine", None) if engine is not None else None
    if family is None:
        return None
    family = str(family).lower()
    return "sglang" if family.startswith("sglang") else family


#: MoE backends an engine runs whose kernels its own tables do not measure: (engine family, table dtype) -> the GPUs,
#: the kernel (a substring of the tables' ``kernel_source``) measured under another engine that prices it, and why.
#: TensorRT-LLM on Blackwell: the tables time its block-fp8 MoE as DeepGEMM only, while its low-latency deployments set
#: ``moe_config.backend: TRTLLM`` (the trtllm-gen kernels, which SGLang and vLLM run through FlashInfer).
ENGINE_MOE_KERNELS = {
    ("trtllm", "fp8_block"): {
        "gpus": ("b200_sxm", "b300_sxm", "gb200", "gb300"), "kernel": "flashinfer_trtllm",
        "backend": "TensorRT-LLM's TRTLLM MoE backend (trtllm-gen kernels)",
        "source": "github:SemiAnalysisAI/InferenceX@0a919c5f81cec20c030d748c813de41c8c415db1:benchmarks/dsr1_fp8_b200_trt.sh",
        "quote": 'MOE_BACKEND="TRTLLM" ... if [[ $CONC -ge 256 ]]; then ... MOE_BACKEND="DEEPGEMM"'},
}


def _engine_kernel(gpu: str, family: str | None, dtype: str) -> FusedMoEFit | None:
    rule = ENGINE_MOE_KERNELS.get((family, dtype))
    if rule is None or gpu not in rule["gpus"]:
        return None
    cands = [f for f in fused_moe_fits() if f.gpu == gpu and f.dtype == dtype and rule["kernel"] in f.kernel_source]
    return max(cands, key=lambda f: (f.shapes, f.rows, f.kernel_source)) if cands else None


@lru_cache(maxsize=256)
def _select(gpu: str, family: str | None, fmt: str) -> FusedMoEFit | None:
    dtypes = MOE_TABLE_DTYPES.get(fmt, ())
    for dt in dtypes:  # a backend the engine runs that its own tables do not measure (ENGINE_MOE_KERNELS)
        if (fit := _engine_kernel(gpu, family, dt)) is not None:
            return fit
    families = ((family,) if family in DEFAULT_MOE_ENGINES else ()) + tuple(f for f in DEFAULT_MOE_ENGINES if f != family)
    for fam in families:
        for dt in dtypes:
            cands = [f for f in fused_moe_fits() if f.gpu == gpu and f.engine == fam and f.dtype == dt]
            if cands:  # the engine's kernel measured on the most model shapes (then rows)
                return max(cands, key=lambda f: (f.shapes, f.rows, f.kernel_source))
    return None


def select_fused_moe_fit(hardware, engine, expert_format: str) -> FusedMoEFit | None:
    """The measured fused-MoE fit that prices ``hardware``'s MoE layers under ``engine`` (an
    :class:`~sdsl.engine.profiles.EngineProfile` or None) with experts in ``expert_format``: the kernels of a backend
    the engine runs that its own tables do not measure (:data:`ENGINE_MOE_KERNELS`), else the engine's own kernel
    where its family (vLLM, SGLang, TensorRT-LLM) is measured on that GPU and format, else the first measured of
    :data:`DEFAULT_MOE_ENGINES`; None where the GPU or format has no measured tables (the roofline's grouped
    GEMMs price it, transferred)."""
    name = str(getattr(hardware, "name", hardware)).lower()
    gpu = MEASURED_MOE_GPUS.get(name)
    if gpu is None:
        return None
    return _select(gpu, _engine_family(engine), str(expert_format).lower())


def fused_moe_provenance(hardware, engine, expert_format: str) -> str:
    """One line: which measured kernel prices the MoE layers, or that they are transferred."""
    fit = select_fused_moe_fit(hardware, engine, expert_format)
    name = getattr(hardware, "name", hardware)
    if fit is None:
        return (f"transferred: no measured fused-MoE tables for {name} in {expert_format}; the roofline's grouped "
                "GEMMs at the dense efficiencies")
    held = "" if fit.loso else f"; fitted on {fit.shapes} model shape{'s' * (fit.shapes != 1)}, not held out"
    family = _engine_family(engine)
    via = (f" as {ENGINE_MOE_KERNELS[family, fit.dtype]['backend']}"
           if _engine_kernel(fit.gpu, family, fit.dtype) is fit else "")
    return (f"measured: {fit.kernel_source} ({fit.engine} {', '.join(fit.versions)}, {fit.dtype}) on {fit.gpu}{via}, "
            f"aiconfigurator-core 0.12.0 tables{held}")
