"""Where and how models run: one frozen value for hardware, parallelism, precision, context, latency
parameters and the engine that runs them, passed whole to :func:`~sdsl.speculation.throughput.predict`,
:func:`~sdsl.roofline.latency.step_time`, :func:`~sdsl.plan.search.evaluate_grid`, the serving
simulator and the CLI (the roofline step time of docs/model.md §3.3 reads all of them; the engine's execution
profile, §3.9, prices the host time around it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from numbers import Integral, Real
from pathlib import Path

from sdsl.catalog.dtypes import dtype_name
from sdsl.engine.profiles import EngineProfile, resolve_engine
from sdsl.catalog.hardware import Hardware, get_hardware
from sdsl.roofline.latency_params import LatencyParams, default_params
from sdsl.errors import InvalidInputError

__all__ = ["Deployment", "precision_options"]


def _check_degree(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
        kind = "expert-parallel" if name == "ep" else "tensor-parallel"
        raise InvalidInputError(f"{name} ({kind} degree) must be a positive integer; got {value!r}.")
    return int(value)


@dataclass(frozen=True)
class Deployment:
    """Hardware and serving settings shared by every pricing call.

    hardware: a catalog name, a TOML/JSON hardware file or a :class:`~sdsl.catalog.hardware.Hardware`
    (resolved to a Hardware). tp / draft_tp: tensor-parallel degrees of the target and the draft.
    dtype: compute precision of activations, KV cache and attention, and of the weights unless
    ``weight_dtype`` says otherwise (fp32, bf16, fp16, fp8). context: tokens already in each
    sequence's KV cache (the mean, for mixed lengths). params: roofline latency parameters;
    ``None`` uses :func:`~sdsl.roofline.latency.default_params` of the hardware and engine.
    weight_dtype: storage format of the decoder's linear-layer weights (bf16, fp8, int4, mxfp4, nvfp4;
    :mod:`sdsl.roofline.weight_formats`), the embeddings and LM head staying in ``dtype``; ``None``: ``dtype``.
    expert_dtype: format of the routed experts' weights (gpt-oss: mxfp4 beside bf16 attention); ``None``:
    ``weight_dtype``. ep: expert-parallel degree, dividing ``tp``: the MoE experts spread over ep groups of
    tp/ep GPUs. expert_dispatch: how tokens reach their experts when ep > 1 — "allreduce" (every GPU holds
    every token; the layer's all-reduce combines) or "all-to-all" (dispatch and combine, DeepEP-style).
    kv_dtype: the KV cache's element type when it differs from ``dtype`` (``"fp8"``: vLLM's and SGLang's
    ``--kv-cache-dtype fp8``, TensorRT-LLM's fp8 KV cache): its bytes in memory and in attention's KV read, and the
    measured decode attention of an fp8 cache where the engine's kernels are timed (:mod:`sdsl.roofline.attention`).
    engine: the engine's execution profile (:class:`~sdsl.engine.profiles.EngineProfile` or any
    :func:`~sdsl.engine.profiles.resolve_engine` spec: ``"vllm"``, ``"vllm:2025-04"``, ``"sglang-spec-v2"``,
    ``"ideal"``, a profile name or ``.json`` file); ``None`` is the newest vLLM profile on a GPU and ``"ideal"``
    (the roofline alone) on a CPU.
    """

    hardware: Hardware
    tp: int = 1
    draft_tp: int = 1
    dtype: str = "bf16"
    context: float = 1024
    params: LatencyParams | None = None
    weight_dtype: str | None = None
    expert_dtype: str | None = None
    ep: int = 1
    expert_dispatch: str = "allreduce"
    engine: EngineProfile | None = None
    kv_dtype: str | None = None

    def __init__(self, hardware, *, tp: int = 1, draft_tp: int = 1, dtype: str = "bf16", context=1024,
                 params: LatencyParams | None = None, weight_dtype: str | None = None,
                 expert_dtype: str | None = None, ep: int = 1, expert_dispatch: str = "allreduce",
                 engine=None, kv_dtype: str | None = None) -> None:
        from sdsl.roofline.weight_formats import get_weight_format

        hw = get_hardware(hardware) if isinstance(hardware, (str, Path, Hardware)) else None
        if hw is None:
            raise InvalidInputError(f"hardware must be a catalog name, a .toml/.json file or a Hardware; got {hardware!r}.")
        kv = None if kv_dtype is None else dtype_name(kv_dtype, "kv_dtype (the KV cache's element type)")
        kv = None if kv == dtype_name(dtype) else kv  # raises InvalidInputError on an unknown dtype
        formats = [None if f is None else get_weight_format(f).name for f in (weight_dtype, expert_dtype)]
        ep = _check_degree("ep", ep)
        if _check_degree("tp", tp) % ep:
            raise InvalidInputError(f"ep (expert-parallel degree) must divide tp; got ep={ep}, tp={tp}.")
        if expert_dispatch not in ("allreduce", "all-to-all"):
            raise InvalidInputError(f"expert_dispatch is 'allreduce' or 'all-to-all'; got {expert_dispatch!r}.")
        if isinstance(context, bool) or not isinstance(context, Real) or not (math.isfinite(context) and context >= 0):
            raise InvalidInputError(f"context must be a finite non-negative number of tokens; got {context!r}.")
        if params is not None and not isinstance(params, LatencyParams):
            raise InvalidInputError(f"params must be LatencyParams or None; got {type(params).__name__}.")
        set_ = object.__setattr__
        set_(self, "hardware", hw)
        set_(self, "tp", _check_degree("tp", tp))
        set_(self, "draft_tp", _check_degree("draft_tp", draft_tp))
        set_(self, "dtype", str(dtype).lower())
        set_(self, "context", int(context) if float(context).is_integer() else float(context))
        profile = resolve_engine(engine, hardware=hw)
        set_(self, "params", params if params is not None else default_params(hw, profile, kv_dtype=kv))
        set_(self, "weight_dtype", formats[0])
        set_(self, "expert_dtype", formats[1])
        set_(self, "ep", ep)
        set_(self, "expert_dispatch", expert_dispatch)
        set_(self, "engine", profile)
        set_(self, "kv_dtype", kv)

    @property
    def cache_dtype(self) -> str:
        """The KV cache's element type: ``kv_dtype``, else ``dtype``."""
        return self.kv_dtype or self.dtype

    @classmethod
    def of(cls, value) -> "Deployment":
        """``value`` itself when it is a Deployment, else ``Deployment(value)`` (defaults for the rest)."""
        return value if isinstance(value, Deployment) else cls(value)

    def replace(self, **changes) -> "Deployment":
        """A copy with ``changes`` applied (validated like the constructor). A new ``hardware`` or ``engine``
        without new ``params`` gets the default parameters of the new pair when these were the old pair's
        defaults (explicitly given parameters are kept)."""
        unknown = sorted(set(changes) - {f.name for f in fields(self)})
        if unknown:
            valid = ", ".join(f.name for f in fields(self))
            raise InvalidInputError(f"Deployment has no field {unknown[0]!r}; its fields are {valid}.")
        moved = "hardware" in changes or "engine" in changes or "kv_dtype" in changes
        if moved and "params" not in changes and self.params == default_params(self.hardware, self.engine,
                                                                               kv_dtype=self.kv_dtype):
            changes["params"] = None
        return replace(self, **changes)

    def for_draft(self, params: LatencyParams | None = None) -> "Deployment":
        """The deployment the draft runs on: tensor parallel over ``draft_tp`` GPUs, with ``params``
        when given (a separate draft calibration), else the same latency parameters; no expert parallelism."""
        return replace(self, tp=self.draft_tp, ep=1, params=params or self.params)

    def to_dict(self) -> dict:
        """JSON-ready: the hardware by name, the latency parameters as a dict, the engine profile's summary."""
        out = {"hardware": self.hardware.name, "tp": self.tp, "draft_tp": self.draft_tp, "dtype": self.dtype,
               "context": self.context, "params": self.params.to_dict()}
        extra = {"weight_dtype": self.weight_dtype, "expert_dtype": self.expert_dtype, "ep": self.ep,
                 "expert_dispatch": self.expert_dispatch, "kv_dtype": self.kv_dtype}
        defaults = {"weight_dtype": None, "expert_dtype": None, "ep": 1, "expert_dispatch": "allreduce", "kv_dtype": None}
        out.update({k: v for k, v in extra.items() if v != defaults[k]})  # dense defaults keep the old keys only
        out["engine"] = self.engine.summary()
        return out


def precision_options(dtype: str) -> dict:
    """Deployment keywords of the CLI's ``--dtype``: ``fp8`` is what the engines' fp8 quantization runs (vLLM, SGLang
    and TensorRT-LLM ``--quantization fp8``: the linear layers' weights in fp8, their GEMMs on the fp8 tensor cores
    with the measured format terms; activations between kernels, the KV cache, attention and the LM head in bf16),
    the form validated against the published FP8 engine rows (VALIDATION.md, "FP8 plain decode of dense targets");
    any other dtype is the compute dtype of every tensor. ``Deployment(dtype="fp8")`` itself prices every tensor in
    fp8."""
    if str(dtype).lower() == "fp8":
        return {"dtype": "bf16", "weight_dtype": "fp8"}
    return {"dtype": dtype}
