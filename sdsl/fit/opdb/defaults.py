"""The latency parameters sdsl ships for GPUs calibrated on NVIDIA's measured operator tables (:mod:`sdsl.fit.opdb.kernels`).

``tools/make_opdb_latency.py`` writes them (from the shipped subset, on any CPU):

- ``sdsl/data/latency/<gpu>.json`` for a GPU Vidur never measured (H200, B200, B300, GB200, GB300, L40S, RTX PRO
  6000): the GEMM form fitted on the engine's bf16 GEMMs, the fp8 and fp4 GEMM terms on its fp8 and nvfp4 GEMMs, the all-reduce on NCCL's
  all_reduce rows; the elementwise kernels (norm, RoPE, activation, add), which the tables do not time, are
  the cross-GPU transfer's from the Vidur-calibrated GPUs, and the source says so;
- ``sdsl/data/latency/opdb/<gpu>.json`` for a Vidur-calibrated GPU the tables also cover (H100-SXM): the
  low-precision GEMM terms, laid over the Vidur calibration by :func:`sdsl.roofline.latency_params.default_params`
  (the terms are ratios to the same source's bf16 GEMMs, so they carry over to another source's bf16 fit), and the
  bf16 GEMM terms (``engine_gemm``), laid over it only for the engine builds that run the tables' kernels
  (:func:`sdsl.roofline.latency_params.runs_table_gemms`).

Both files carry ``attention`` and ``attention_fp8_kv`` sections (:func:`attention_terms`): the measured
decode-attention form (:mod:`sdsl.roofline.attention`) fitted per engine on the GPU's bf16-KV and fp8-KV rows, which
:func:`sdsl.roofline.latency_params.default_params` lays over the calibration for the engines that run those kernels.
"""

from __future__ import annotations

from sdsl.roofline.latency_params import ATTENTION_FIELDS, LatencyParams, _packaged_params

__all__ = ["ENGINE", "build_measured_params", "build_format_overlay", "FORMAT_FIELDS", "ELEMENTWISE_FIELDS",
           "TRANSFER_BEFORE_CATALOG", "SETTLED_REL", "prices_agree", "settle", "attention_terms", "attention_agrees",
           "ATTENTION_SECTIONS"]

#: Whose tables calibrate the shipped defaults: vLLM's, the engine of sdsl's newest dated profiles.
ENGINE = "vllm"
FORMAT_FIELDS = ("fp8_compute", "fp8_memory", "fp8_t_extra", "fp4_compute", "fp4_memory", "fp4_t_extra")
ELEMENTWISE_FIELDS = ("t_elementwise", "eta_norm", "eta_rope", "eta_act", "eta_add", "row_norm", "row_rope", "row_act")
#: Shipped before the catalog gained B300, GB200 and GB300, whose datasheet features rescale the cross-GPU transfer:
#: B200's transferred elementwise terms (and the weights its source names) refit up to 1.1% away; its measured terms
#: are the refit's. Kept as shipped, so B200 prices steps as its published evidence was measured with.
TRANSFER_BEFORE_CATALOG = {"b200_sxm"}
#: A refit that prices every row of the tables within this relative distance of the shipped file is the same fit:
#: least squares stops wherever a machine's BLAS rounding stops it, and terms at a bound wander without changing a price.
SETTLED_REL = 1e-4


def prices_agree(gpu: str, a: LatencyParams, b: LatencyParams, *, nccl: bool = True) -> bool:
    """Whether ``a`` and ``b`` price every GEMM row of ``gpu``'s vLLM tables (bf16, fp8, nvfp4) and, with ``nccl``,
    every NCCL all-reduce row within :data:`SETTLED_REL`."""
    import numpy as np

    from sdsl.fit.opdb.kernels import GEMM_FORMATS, allreduce_rows, gemm_rows, hardware_of, predict_gemm, predict_nccl

    hw = hardware_of(gpu)
    rows = gemm_rows(gpu, ENGINE)
    pairs = [(predict_gemm(r, hw, GEMM_FORMATS[d], a), predict_gemm(r, hw, GEMM_FORMATS[d], b))
             for d in ("bfloat16", "fp8", "nvfp4") if len(r := rows[rows["dtype"] == d])]
    if nccl:
        ar = allreduce_rows(gpu, "nccl")
        pairs.append((predict_nccl(ar, hw, a), predict_nccl(ar, hw, b)))
    return all(np.allclose(x, y, rtol=SETTLED_REL, atol=0.0) for x, y in pairs)


def attention_terms(gpu: str, eta_compute: float, kv_dtype: str = "bfloat16") -> dict:
    """{tables' engine: {"params": the measured attention fields, "source"}} for every engine whose decode attention
    over a ``kv_dtype`` KV cache (bfloat16 or fp8) ``gpu``'s tables time: :func:`sdsl.fit.opdb.kernels.fit_attention`
    at the GPU's GEMM ``eta_compute`` (the compute side of the form is the step's)."""
    from sdsl.fit.opdb import OPDB_VERSION
    from sdsl.fit.opdb.kernels import attention_rows, fit_attention, hardware_of

    hw = hardware_of(gpu)
    kv = "bf16" if kv_dtype == "bfloat16" else kv_dtype
    out = {}
    for engine in ("vllm", "sglang", "trtllm"):
        rows = attention_rows(gpu, engine, kv_dtype)
        if rows.empty:
            continue
        fit = fit_attention(rows, hw, eta_compute)
        out[engine] = {"params": fit.terms(),
                       "source": (f"decode attention fitted on aiconfigurator-core {OPDB_VERSION}'s measured {hw.name} "
                                  f"{kv}-KV decode attention ({len(rows)} rows, {_versions(rows)})")}
    return out


def attention_agrees(gpu: str, base: LatencyParams, old: dict, new: dict, kv_dtype: str = "bfloat16") -> bool:
    """Whether two attention sections price every ``kv_dtype``-KV decode-attention row of ``gpu`` within
    :data:`SETTLED_REL`, each engine's terms on its own rows, laid over ``base``."""
    import numpy as np

    from sdsl.fit.opdb.kernels import AttentionFit, attention_rows, hardware_of, predict_attention

    if set(old) != set(new):
        return False
    hw = hardware_of(gpu)

    def price(rows, terms):
        return predict_attention(rows, hw, AttentionFit.of(terms, base.eta_compute))

    return all(np.allclose(price(r, old[e]["params"]), price(r, new[e]["params"]), rtol=SETTLED_REL, atol=0.0)
               for e in new if len(r := attention_rows(gpu, e, kv_dtype)))


#: The sections of a shipped calibration that hold measured attention terms per engine, and their rows' KV dtype.
ATTENTION_SECTIONS = {"attention": "bfloat16", "attention_fp8_kv": "fp8"}


def _text(data):
    """``data`` with every float blanked: what a refit must reproduce exactly (names, sources, versions, tiles)."""
    if isinstance(data, dict):
        return {k: _text(v) for k, v in data.items()}
    return None if isinstance(data, float) else data


def settle(gpu: str, new: dict, old: dict | None) -> dict:
    """What ``tools/make_opdb_latency.py`` writes for ``gpu``: the shipped file ``old`` where the refit ``new`` (of
    :func:`build_measured_params` or :func:`build_format_overlay`) is the same fit — the same text, the same prices
    (:func:`prices_agree`, :func:`attention_agrees`) and the same transferred terms — so rerunning it on any CPU
    writes the shipped bytes; else ``new``, a GPU in :data:`TRANSFER_BEFORE_CATALOG` keeping its shipped transferred
    terms and source. Each attention section (:data:`ATTENTION_SECTIONS`) settles on its own."""
    if not old:
        return new
    rest = _settle_rest(gpu, {k: v for k, v in new.items() if k not in ATTENTION_SECTIONS},
                        {k: v for k, v in old.items() if k not in ATTENTION_SECTIONS})
    base = LatencyParams.from_dict(rest["params"]) if "format" in rest else _packaged_params(rest["hardware"])
    sections = {}
    for name, kv in ATTENTION_SECTIONS.items():
        terms, shipped = new.get(name), old.get(name)
        if terms is not None and shipped is not None and _text(shipped) == _text(terms):
            terms = shipped if attention_agrees(gpu, base, shipped, terms, kv) else terms
        if terms is not None:
            sections[name] = terms
    out = {}
    for k, v in rest.items():  # the sections right after the GEMM terms they ride on
        out[k] = v
        if k == ("engine_gemm" if "engine_gemm" in rest else "params"):
            out.update(sections)
    return out


def _settle_rest(gpu: str, new: dict, old: dict) -> dict:
    """:func:`settle` without the attention sections."""
    out = dict(new)
    if gpu in TRANSFER_BEFORE_CATALOG:
        keep = tuple(old.get("transferred", ())) + ("source",)
        out["params"] = {**new["params"], **{k: old["params"][k] for k in keep if k in old.get("params", {})}}
    if _text(old) != _text(out):
        return out
    if "engine_gemm" in out:  # an overlay: each priced form laid over the GPU's Vidur calibration
        base = _packaged_params(out["hardware"])
        forms = [(old["params"], out["params"]), ({**old["params"], **old["engine_gemm"]["params"]},
                                                  {**out["params"], **out["engine_gemm"]["params"]})]
        same = all(prices_agree(gpu, base.replace(**o), base.replace(**n), nccl=False) for o, n in forms)
        return old if same else out
    a, b = LatencyParams.from_dict(old["params"]), LatencyParams.from_dict(out["params"])
    moved = [k for k in old.get("transferred", ()) if abs(getattr(a, k) - getattr(b, k)) > SETTLED_REL * abs(getattr(a, k))]
    return old if not moved and prices_agree(gpu, a, b) else out


def _versions(rows) -> str:
    return ", ".join(sorted({f"{e} {v}" for e, v in zip(rows["engine"], rows["engine_version"])}))


def _basis(source: str) -> str:
    """The GPUs and weights a transferred source names ("... kernel weights H100-SXM 1.00, ...)")."""
    head, _, rest = source.partition("kernel weights ")
    return rest.split(")")[0] if rest else source


def _format_terms(gpu: str, bf16_params: LatencyParams, hw) -> tuple[dict, list[str]]:
    """fp8 (table "fp8": per-tensor scaled, what dense FP8 checkpoints run) and nvfp4 terms over the same
    source's bf16 fit."""
    from sdsl.fit.opdb.kernels import fit_gemm, gemm_rows

    out, notes = {}, []
    for dtype, fmt, native in (("fp8", "fp8", "fp8"), ("nvfp4", "nvfp4", "fp4")):
        rows = gemm_rows(gpu, ENGINE, dtype)
        if rows.empty:
            continue
        p = fit_gemm(rows, hw, fmt, base=bf16_params)
        out.update({f"{native}_{k}": float(getattr(p, f"{native}_{k}")) for k in ("compute", "memory", "t_extra")})
        out[f"{native}_m_tile"] = int(getattr(p, f"{native}_m_tile"))
        notes.append(f"{dtype} GEMMs ({len(rows)}, {_versions(rows)})")
    return out, notes


def build_format_overlay(gpu: str) -> dict:
    """The low-precision GEMM terms of ``gpu`` (a database name) as laid over a Vidur calibration."""
    from sdsl.fit.opdb import OPDB_VERSION
    from sdsl.fit.opdb.kernels import GEMM_TERMS, fit_gemm, gemm_rows, hardware_of
    from sdsl.roofline.latency_params import TABLE_GEMMS_FROM

    hw = hardware_of(gpu)
    bf16 = gemm_rows(gpu, ENGINE, "bfloat16")
    fit = fit_gemm(bf16, hw, "bf16")
    terms, notes = _format_terms(gpu, fit, hw)
    eta_c = _packaged_params(hw.name.lower()).eta_compute  # the Vidur calibration the overlay rides on
    return {"hardware": hw.name.lower(), "params": terms,
            "attention": attention_terms(gpu, eta_c), "attention_fp8_kv": attention_terms(gpu, eta_c, "fp8"),
            "source": (f"low-precision GEMM terms fitted on aiconfigurator-core {OPDB_VERSION}'s measured "
                       f"{hw.name} " + "; ".join(notes) + f" against its bf16 GEMMs ({_versions(bf16)})"),
            "engine_gemm": {"params": {**{k: float(getattr(fit, k)) for k in GEMM_TERMS}, "m_tile": int(fit.m_tile)},
                            "source": (f"bf16 GEMMs fitted on its measured bf16 GEMMs ({len(bf16)}, {_versions(bf16)}) "
                                       f"for {ENGINE} builds from {TABLE_GEMMS_FROM[ENGINE][:4]} on")},
            "measured_on": {"source": f"aiconfigurator-core {OPDB_VERSION}", "engine": ENGINE,
                            "engine_version": sorted(set(bf16["engine_version"]))}}


def build_measured_params(gpu: str, transferred: LatencyParams) -> dict:
    """The whole shipped calibration of ``gpu`` (module docstring); ``transferred``: what the cross-GPU transfer
    gives the GPU from the Vidur-calibrated ones (its elementwise terms are kept)."""
    from sdsl.fit.opdb import OPDB_VERSION
    from sdsl.fit.opdb.kernels import NCCL_TERMS, allreduce_rows, fit_gemm, fit_nccl, gemm_rows, hardware_of

    hw = hardware_of(gpu)
    bf16 = gemm_rows(gpu, ENGINE, "bfloat16")
    params = fit_gemm(bf16, hw, "bf16")
    terms, notes = _format_terms(gpu, params, hw)
    nccl = allreduce_rows(gpu, "nccl")
    ar = fit_nccl(nccl, hw)
    params = params.replace(**terms, **{k: getattr(ar, k) for k in NCCL_TERMS}, allreduce_ll_latency=0.0,
                            allreduce_ll_efficiency=0.0, allreduce_floor=0.0,
                            **{k: getattr(transferred, k) for k in ELEMENTWISE_FIELDS})
    source = (f"GEMMs fitted on aiconfigurator-core {OPDB_VERSION}'s measured {hw.name} bf16 GEMMs ({len(bf16)}, "
              f"{_versions(bf16)}), " + "; ".join(notes) + f"; all-reduce fitted to its NCCL all_reduce rows "
              f"({len(nccl)}, NCCL {', '.join(sorted(set(nccl['engine_version'])))}); elementwise kernels "
              f"(norm, RoPE, activation, add; not in the tables) transferred by the cross-GPU efficiency model from "
              f"{_basis(transferred.source)}")
    params = params.replace(source=source)
    return {"format": "sdsl-calibration", "format_version": 1, "hardware": hw.name.lower(), "dtype": "bf16",
            "params": {k: v for k, v in params.to_dict().items() if k not in ATTENTION_FIELDS},
            "attention": attention_terms(gpu, params.eta_compute),
            "attention_fp8_kv": attention_terms(gpu, params.eta_compute, "fp8"),
            "measured_on": {"source": f"aiconfigurator-core {OPDB_VERSION}", "engine": ENGINE,
                            "engine_version": sorted(set(bf16["engine_version"])),
                            "nccl_version": sorted(set(nccl["engine_version"]))},
            "transferred": list(ELEMENTWISE_FIELDS)}
