"""How an engine runs a decoding step around the GPU's work: :class:`EngineProfile`, the execution model that
:func:`sdsl.speculation.step.price_step` adds to the roofline (docs/model.md §3.9).

The roofline (§3.3) prices the kernels. An engine also spends host time — scheduling, input preparation,
sampling, the speculative worker's bookkeeping, the Python and driver work of launching kernels that are not
replayed from a CUDA graph — and the GPU waits for whatever of it is not overlapped with GPU work. A profile
holds one engine build's terms, each zero in :data:`IDEAL` (the roofline alone, the bound):

- ``host_step_s`` H: host seconds of one engine step (plain or speculative): scheduling and preparing the next
  batch, sampling, output processing. ``overlap_plain`` / ``overlap_spec``: the engine prepares step n + 1 while the
  GPU runs step n (vLLM async scheduling, SGLang's overlap scheduler and spec v2), so the two pipelined stages
  last max(H, GPU) and the exposed host time is max(0, H − GPU); without overlap H adds to the GPU time.
- ``spec_step_s`` S: host seconds a speculative step adds once (rejection bookkeeping, device-to-host syncs of
  the accepted counts, the worker's own scheduling); ``draft_pass_s`` d: host seconds per separate drafting or
  worker forward (inputs and metadata between graph replays). Both consume the same step's GPU results (the
  accepted tokens, each pass's drafts), so no overlap hides them: exposed host of a speculative step =
  [max(0, H − GPU) with overlap, else H] + S + d·(drafting passes + worker passes).
  This is the form the published overlap on/off pairs support: overlap removed ≈1 ms per step (SGLang PR #11398
  1.107 ms, vLLM PR #25872 0.97 ms), a fraction of what a speculative step costs beyond its GPU work.
- ``zero_sync_spec``: the build's speculative host work waits for none of the step's GPU results (vLLM's model
  runner V2: its GPU-side input preparation consumes the rejection sampler's results), so with ``overlap_spec`` S and
  d run ahead with H and the exposed host time is max(0, H + S + d·passes − GPU). Only for the proposers that runner
  runs (:data:`ZERO_SYNC_KINDS`: EAGLE, EAGLE-3, MTP); the others fall back to the runner before it.
- ``in_graph_kinds``: proposer kinds whose whole speculative step (drafting, verification, acceptance) runs inside
  the target's forward under one CUDA graph (TensorRT-LLM's one-model MTP): such a step pays a plain step's host
  time (max(0, H − GPU) with ``overlap_plain``, else H) and no S or d.
- ``graphs_target`` / ``graphs_draft`` / ``graphs_extend``: the target's forwards, the drafting passes and a
  head's draft-extend pass replay CUDA graphs. A forward that runs eagerly launches K kernels, each costing
  ``launch_s`` of host time, added to its GPU time: GPU + K·launch_s. K is counted from the model's structure for
  the engine's kernels (:data:`KERNEL_STYLES`, :func:`forward_kernels`). The sum, not max(GPU, K·launch_s), is
  what the graphs on/off pairs of GPU-bound forwards show: vLLM PR #1440 saved 1.5 ms per Llama-2-7B forward and
  SGLang PR #4247 5.16 ms per EAGLE-3 step where the GPU's own work exceeds the launches (a max would save
  nothing); most of a layer's kernels are small, finish before the next launch arrives, and leave the GPU waiting
  for each one.
- ``capture_sizes`` / ``capture_unit``: the captured graph sizes (tokens per step, vLLM; requests per step,
  SGLang and TensorRT-LLM). A step is padded up to the next captured size and priced there; above the largest it
  runs eagerly.
- ``rejection_probs``: the rejection sampler writes and reads fp32 probabilities of every verified position over
  the vocabulary (a memory term, b·n·V·4 bytes each way).
- ``allreduce``: how the tensor-parallel all-reduce of a decode step runs. ``"nccl"`` is the calibrated NCCL form
  of the GPU's latency parameters (fitted to eager NCCL calls, :func:`sdsl.roofline.kernels.allreduce_time`).
  ``"custom"`` is an engine's own intra-node kernel for small messages (FasterTransformer's one-shot and
  two-shot all-reduce, as vLLM's ``custom_all_reduce``, SGLang's, TensorRT-LLM's ONESHOT/TWOSHOT and PyTorch's
  IntraNodeComm that gpt-fast enables run it): one kernel in which every GPU reads the others' buffers over
  NVLink after a flag barrier. One-shot (below ``allreduce_oneshot_bytes`` for the tensor-parallel degree):
  a + (t − 1)·M / (η·B) — each GPU reads the t − 1 other buffers of M bytes; two-shot (above it, up to
  ``allreduce_max_bytes``): 2a + 2(t − 1)/t·M / (η·B), a reduce-scatter and an all-gather, each reading
  (t − 1)/t of the message; above ``allreduce_max_bytes`` NCCL. B is the catalog's per-direction NVLink
  bandwidth, η the kernel's measured fraction of it (``allreduce_eta``; 0: the GPU's calibrated interconnect
  efficiency), a = ``allreduce_latency_s`` the kernel's fixed
  latency (launch to completion, the barrier included).

A speculative worker's step at k = 0 (an EAGLE-style head still runs its draft-extend pass, sdsl.speculation.proposers)
pays the speculative host terms too: the drafter tax of an engine with speculation enabled and nothing drafted.
Everything broadcasts over numpy arrays.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields, replace
from functools import lru_cache
from pathlib import Path

import numpy as np

from sdsl.engine.allreduce import allreduce_latencies, custom_allreduce_time  # noqa: F401
from sdsl.engine.launches import (ALLREDUCES_PER_LAYER, HEAD_EXTRA_KERNELS, KERNEL_STYLES,  # noqa: F401
                                      forward_kernels, proposer_kernels)
from sdsl._checks import month_days, valid_date
from sdsl.errors import ConfigError, InvalidInputError, UnknownNameError

__all__ = ["EngineProfile", "IDEAL", "StepPieces", "KERNEL_STYLES", "forward_kernels", "proposer_kernels",
           "engine_profiles", "resolve_engine", "load_engine_file", "default_engine", "padded_batch",
           "host_seconds", "FREE_TERMS", "DEFAULT_ENGINE", "ALLREDUCE_KINDS", "ZERO_SYNC_KINDS",
           "custom_allreduce_time", "allreduce_latencies"]

#: The terms :func:`sdsl.fit.engine_calibration.fit_engine` can fit (seconds).
FREE_TERMS = ("host_step_s", "spec_step_s", "draft_pass_s", "launch_s", "allreduce_latency_s")
_TIME_TERMS = FREE_TERMS
_FLAGS = ("overlap_plain", "overlap_spec", "zero_sync_spec", "graphs_target", "graphs_draft", "graphs_extend",
          "rejection_probs", "chains_only")
DEFAULT_ENGINE = "vllm"  # what Deployment prices with when no engine is given (GPU hardware)
#: Proposer kinds a zero-sync build runs zero-sync; vLLM's model runner V2 announcement: "Spec decoding methods other
#: than Eagle/Eagle3/MTP" not supported (v0.18.0), so draft models and n-gram keep the V1 runner's summed S and d.
ZERO_SYNC_KINDS = ("eagle", "eagle3", "mtp")
ALLREDUCE_KINDS = ("nccl", "custom")


@dataclass(frozen=True)
class EngineProfile:
    """One engine build's execution terms (module docstring; docs/model.md §3.9). Times in seconds.

    ``name`` identifies the profile (``vllm-2025-07``), ``engine`` the family it is selected by (``vllm``,
    ``sglang``, ``sglang-spec-v2``, ``trtllm``, ``gpt-fast``, ``hf-eager``, ``eager-pytorch``, ``llamacpp``),
    ``date`` the build's date (YYYY-MM-DD), ``build`` what it is. ``sources`` maps a term to where its value
    comes from (a source and quote, or the fit and its leave-one-source-out result)."""

    name: str = "ideal"  # profile id (vllm-2025-07)
    engine: str = "ideal"  # family it is selected by (vllm, sglang, trtllm, gpt-fast, hf-eager, llamacpp ...)
    date: str = ""  # the build's date, YYYY-MM-DD
    build: str = "the operator-level roofline alone: no engine host time, all-reduce as NCCL"  # what the build is
    host_step_s: float = 0.0  # s, host time of one engine step (scheduling, sampling, output)
    spec_step_s: float = 0.0  # s, host time a speculative step adds once
    draft_pass_s: float = 0.0  # s, host time per separate drafting or worker forward
    launch_s: float = 0.0  # s, host time per kernel launch of an eager forward
    overlap_plain: bool = False  # plain steps overlap host time with the previous GPU step
    overlap_spec: bool = False  # speculative steps overlap host time with the previous GPU step
    zero_sync_spec: bool = False  # S and d wait for no GPU result: with overlap_spec hidden like H (ZERO_SYNC_KINDS)
    in_graph_kinds: tuple = ()  # proposer kinds whose speculative step is one forward in one graph: no S or d
    graphs_target: bool = True  # the target's forwards replay CUDA graphs
    graphs_draft: bool = True  # the drafting passes replay CUDA graphs
    graphs_extend: bool = True  # a head's draft-extend pass replays CUDA graphs
    kernels: str = "fused"  # kernel style counted per eager forward (KERNEL_STYLES)
    capture_sizes: tuple = ()  # captured graph sizes, increasing (a step is padded up to the next)
    capture_unit: str = "tokens"  # tokens (vLLM) or requests (SGLang, TensorRT-LLM) per captured size
    rejection_probs: bool = False  # the sampler writes and reads fp32 probabilities over the vocabulary
    chains_only: bool = False  # the build verifies chains only (top-1 drafts): a token tree cannot run on it
    allreduce: str = "nccl"  # nccl, or custom (the engine's own one-/two-shot kernel for small messages)
    allreduce_latency_s: float = 0.0  # s, the custom all-reduce kernel's fixed latency
    allreduce_oneshot_bytes: tuple = ()  # bytes below which one-shot runs, per TP degree (2, 4, 8)
    allreduce_max_bytes: int = 0  # bytes above which the custom all-reduce hands over to NCCL
    allreduce_eta: float = 0.0  # the custom kernel's fraction of the link bandwidth; 0: the GPU's eta_interconnect
    # term -> where its value comes from (a source and quote, or the fit)
    sources: dict = field(default_factory=dict, compare=False, hash=False, repr=False)

    def __post_init__(self):
        set_ = object.__setattr__
        for name in _TIME_TERMS:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and v >= 0):
                raise InvalidInputError(f"Engine profile {self.name!r}: {name} must be a finite non-negative number "
                                        f"of seconds; got {v!r}.")
            set_(self, name, float(v))
        for name in _FLAGS:
            v = getattr(self, name)
            if not isinstance(v, (bool, np.bool_)):
                raise InvalidInputError(f"Engine profile {self.name!r}: {name} must be true or false; got {v!r}.")
            set_(self, name, bool(v))
        if self.kernels not in KERNEL_STYLES:
            raise InvalidInputError(f"Engine profile {self.name!r}: kernels must be one of "
                                    f"{', '.join(KERNEL_STYLES)}; got {self.kernels!r}.")
        if self.capture_unit not in ("tokens", "requests"):
            raise InvalidInputError(f"Engine profile {self.name!r}: capture_unit is 'tokens' or 'requests'; "
                                    f"got {self.capture_unit!r}.")
        sizes = tuple(int(s) for s in self.capture_sizes)
        if any(s < 1 for s in sizes) or list(sizes) != sorted(set(sizes)):
            raise InvalidInputError(f"Engine profile {self.name!r}: capture_sizes must be increasing positive integers.")
        set_(self, "capture_sizes", sizes)
        kinds = tuple(str(k) for k in self.in_graph_kinds)
        if any(k not in ZERO_SYNC_KINDS for k in kinds):
            raise InvalidInputError(f"Engine profile {self.name!r}: in_graph_kinds are among {', '.join(ZERO_SYNC_KINDS)}; "
                                    f"got {list(self.in_graph_kinds)!r}.")
        set_(self, "in_graph_kinds", kinds)
        if self.allreduce not in ALLREDUCE_KINDS:
            raise InvalidInputError(f"Engine profile {self.name!r}: allreduce is one of {', '.join(ALLREDUCE_KINDS)}; "
                                    f"got {self.allreduce!r}.")
        limits = tuple(int(v) for v in self.allreduce_oneshot_bytes)
        if self.allreduce == "custom" and (len(limits) != 3 or any(v < 0 for v in limits) or self.allreduce_max_bytes < 1):
            raise InvalidInputError(f"Engine profile {self.name!r}: a custom all-reduce needs allreduce_oneshot_bytes "
                                    "(three one-shot limits, for tp 2, <= 4 and <= 8) and a positive allreduce_max_bytes.")
        set_(self, "allreduce_oneshot_bytes", limits)
        set_(self, "allreduce_max_bytes", int(self.allreduce_max_bytes))
        if not (0.0 <= float(self.allreduce_eta) <= 1.0):
            raise InvalidInputError(f"Engine profile {self.name!r}: allreduce_eta is a fraction of the link bandwidth in "
                                    f"[0, 1] (0: the GPU's calibrated one); got {self.allreduce_eta!r}.")
        set_(self, "allreduce_eta", float(self.allreduce_eta))
        if self.date and not valid_date(self.date):
            raise InvalidInputError(f"Engine profile {self.name!r}: date must be YYYY-MM-DD; got {self.date!r}.")

    @property
    def spec_host_runs_ahead(self) -> bool:
        """S and d run ahead with H (``overlap_spec`` and ``zero_sync_spec``), for :data:`ZERO_SYNC_KINDS` only."""
        return self.overlap_spec and self.zero_sync_spec

    @property
    def is_ideal(self) -> bool:
        """True when every term is zero and nothing runs eagerly or padded: the roofline alone."""
        return (not any(getattr(self, t) for t in _TIME_TERMS) and self.graphs_target and self.graphs_draft
                and self.graphs_extend and not self.capture_sizes and not self.rejection_probs and self.allreduce == "nccl")

    def replace(self, **changes) -> "EngineProfile":
        """A copy with ``changes`` applied (validated like the constructor)."""
        return replace(self, **changes)

    def to_dict(self) -> dict:
        """JSON-ready: every term, and the sources of the values."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "sources"}
        out["capture_sizes"] = list(self.capture_sizes)
        out["in_graph_kinds"] = list(self.in_graph_kinds)
        out["allreduce_oneshot_bytes"] = list(self.allreduce_oneshot_bytes)
        out["sources"] = dict(self.sources)
        return out

    def summary(self) -> dict:
        """What an output says about the profile that priced it: name, engine, date, build and the terms."""
        return {"name": self.name, "engine": self.engine, "date": self.date, "build": self.build,
                **{t: getattr(self, t) for t in _TIME_TERMS}, **{f: getattr(self, f) for f in _FLAGS},
                "kernels": self.kernels, "capture_sizes": list(self.capture_sizes), "capture_unit": self.capture_unit,
                "in_graph_kinds": list(self.in_graph_kinds), "allreduce": self.allreduce, "allreduce_oneshot_bytes": list(self.allreduce_oneshot_bytes),
                "allreduce_max_bytes": self.allreduce_max_bytes, "allreduce_eta": self.allreduce_eta}

    @classmethod
    def from_dict(cls, data: dict, *, origin: str = "engine profile") -> "EngineProfile":
        """A profile from its :meth:`to_dict` form (a term given as ``{"value": ..., ...}`` keeps the rest as its
        source); unknown keys are a :class:`~sdsl.errors.ConfigError`."""
        if not isinstance(data, dict):
            raise ConfigError(f"{origin}: an engine profile is a JSON object.")
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known - {"format", "format_version", "loso_error"}
        if unknown:
            raise ConfigError(f"{origin}: unknown engine profile key(s) {', '.join(sorted(unknown))}.")
        values, sources = {}, dict(data.get("sources") or {})
        for key in known - {"sources"}:
            if key not in data:
                continue
            v = data[key]
            if isinstance(v, dict) and "value" in v:
                sources[key] = {k: x for k, x in v.items() if k != "value"}
                v = v["value"]
            values[key] = v
        for key in ("capture_sizes", "allreduce_oneshot_bytes", "in_graph_kinds"):
            if key in values:
                values[key] = tuple(values[key])
        try:
            return cls(**values, sources=sources)
        except TypeError as exc:
            raise ConfigError(f"{origin}: bad engine profile ({exc}).") from None


IDEAL = EngineProfile()


# -- the catalog -------------------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _catalog() -> tuple:
    from sdsl._io import load_json
    from sdsl._paths import data_path

    data = load_json(data_path("engines", "profiles.json"))
    return tuple(EngineProfile.from_dict(p, origin=f"profiles.json:{p.get('name')}") for p in data["profiles"])


def engine_profiles() -> dict:
    """{name: :class:`EngineProfile`} of the shipped catalog (sdsl/data/engines/profiles.json), oldest first per
    engine, plus ``ideal``."""
    return {"ideal": IDEAL, **{p.name: p for p in sorted(_catalog(), key=lambda p: (p.engine, p.date))}}


def _period_end(text: str) -> str:
    """The last day of ``text``, a month (YYYY-MM) or a day (YYYY-MM-DD), as YYYY-MM-DD."""
    if valid_date(text) or valid_date(text + "-01"):
        y, m, *d = (int(v) for v in text.split("-"))
        return f"{y:04d}-{m:02d}-{d[0] if d else month_days(y, m):02d}"
    raise InvalidInputError(f"An engine's date is YYYY-MM or YYYY-MM-DD (e.g. vllm:2025-04); got {text!r}.")


def resolve_engine(spec=None, *, hardware=None) -> EngineProfile:
    """The profile ``spec`` names: an :class:`EngineProfile` itself; ``None`` the default (:func:`default_engine`);
    ``"ideal"``; a profile name (``"vllm-2025-07"``); an engine (``"vllm"``: its newest profile); ``"ENGINE:YYYY-MM"``
    or ``"ENGINE:YYYY-MM-DD"`` (its newest profile dated no later than that month or day); or a ``.json`` file
    (:func:`load_engine_file`, e.g. what ``sdsl calibrate engine`` writes). Anything else is a one-line error naming what exists."""
    if isinstance(spec, EngineProfile):
        return spec
    if spec is None:
        return default_engine(hardware)
    text = str(spec).strip()
    if text.lower().endswith(".json") or Path(text).is_file():
        return load_engine_file(text)
    key = text.lower()
    catalog = engine_profiles()
    if key in catalog:
        return catalog[key]
    engine, _, month = key.partition(":")
    family = [p for p in catalog.values() if p.engine == engine]
    if not family:
        engines = sorted({p.engine for p in catalog.values()})
        raise UnknownNameError(f"Unknown engine {spec!r}; known: {', '.join(engines)} (ENGINE or ENGINE:YYYY-MM[-DD]), "
                               "a profile name, or a .json profile file.")
    if month:
        end = _period_end(month)
        family = [p for p in family if p.date <= end]
        if not family:
            first = min(p.date for p in catalog.values() if p.engine == engine)
            raise UnknownNameError(f"No {engine} profile is dated {month} or earlier; the first is {first}.")
    return max(family, key=lambda p: p.date)


def default_engine(hardware=None) -> EngineProfile:
    """The profile a Deployment prices with when none is given: the newest vLLM profile (what most users run) on a
    GPU; :data:`IDEAL` on a CPU (sdsl's reference decoder, whose host times are measured and given explicitly)."""
    if hardware is not None and getattr(hardware, "kind", "gpu") == "cpu":
        return IDEAL
    return resolve_engine(DEFAULT_ENGINE)


def load_engine_file(path) -> EngineProfile:
    """A profile from a JSON file (one profile object, as ``sdsl calibrate engine`` writes or
    :meth:`EngineProfile.to_dict` gives); a missing or malformed file is a one-line ConfigError."""
    from sdsl._io import load_json

    data = load_json(path)
    if isinstance(data, dict) and "profile" in data and isinstance(data["profile"], dict):
        data = data["profile"]
    labels = {"name", "engine", "date", "build", "sources", "format", "format_version", "loso_error"}
    if isinstance(data, dict) and not set(data) - labels:
        raise ConfigError(f"{path} holds no engine profile terms (host times, flags, kernels or capture sizes); "
                          "write one with `sdsl calibrate engine` or EngineProfile.to_dict().")
    return EngineProfile.from_dict(data, origin=str(path))


# -- padding to captured graph sizes ----------------------------------------------------------------------------


def padded_batch(profile: EngineProfile, batch, tokens_per_seq):
    """(batch the forward is priced at, runs eagerly) of a step of ``batch`` sequences with ``tokens_per_seq`` new
    tokens each: padded up to the next captured size (tokens for ``capture_unit="tokens"``, requests otherwise);
    above the largest captured size the step runs eagerly at its own batch. Without capture sizes: unchanged."""
    b = np.asarray(batch, dtype=float)
    q = np.asarray(tokens_per_seq, dtype=float)
    if not profile.capture_sizes:
        return b + 0.0 * q, np.zeros(np.broadcast_shapes(b.shape, q.shape), dtype=bool)
    sizes = np.asarray(profile.capture_sizes, dtype=float)
    need = b * q if profile.capture_unit == "tokens" else b + 0.0 * q
    idx = np.searchsorted(sizes, need - 1e-9)
    eager = idx >= sizes.size
    cap = sizes[np.minimum(idx, sizes.size - 1)]
    padded = np.where(eager, b + 0.0 * q, cap / q if profile.capture_unit == "tokens" else cap + 0.0 * q)
    return np.maximum(padded, b), eager


# -- host time of a step -------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)  # a result object: equal only to itself
class StepPieces:
    """What the engine model needs of a priced step (arrays broadcast over the step's configurations): the GPU
    seconds of the speculative and the plain step, whether the step is speculative, separate drafting and worker
    forwards, drafting depth, and for each forward that may run eagerly its count per step, kernels and GPU seconds
    (a row of ``eager``: (forwards, kernels each, GPU seconds each, runs eagerly))."""

    gpu_step_s: np.ndarray
    gpu_plain_s: np.ndarray
    speculative: np.ndarray
    passes: np.ndarray
    steps: np.ndarray
    kind: str  # the proposer kind (an array of kinds for stacked steps)
    eager_step: tuple
    eager_plain: tuple
    allreduce_step: np.ndarray = 0.0  # custom all-reduce latencies a in the step's GPU time (allreduce_latencies)
    allreduce_plain: np.ndarray = 0.0  # and in the plain step's

    def to_dict(self) -> dict:
        conv = lambda a: np.asarray(a).tolist()  # noqa: E731
        return {k: conv(v) if k not in ("kind", "eager_step", "eager_plain") else v for k, v in asdict(self).items()
                if k not in ("eager_step", "eager_plain")}


def _eager_extra(rows, launch_s: float, one_graph=False, graphs_target: bool = True):
    """Σ forwards · kernels · launch_s over the forwards that run eagerly: the host time of launching their kernels,
    added to the forward's GPU time (module docstring: the graphs on/off pairs show it adding even to GPU-bound
    forwards). A row is (forwards per step, kernels each, GPU seconds each, runs eagerly). ``one_graph``: the step's
    forwards are one graph, eager together only where the target's forward is."""
    extra = 0.0
    for n, k, _gpu, eager in rows:
        runs_eagerly = np.where(one_graph, not graphs_target, eager)
        extra = extra + np.where(runs_eagerly, n * k * launch_s, 0.0)
    return extra


def host_seconds(profile: EngineProfile, pieces: StepPieces, **terms):
    """(engine seconds added to the speculative step, to the plain step): eager launches beyond the GPU time, and
    the exposed host time (module docstring): H summed with the GPU time without overlap, max(0, H − GPU) with it;
    a speculative step's S and d per separate forward summed, or hidden with H (max(0, H + S + d·passes − GPU)) by
    a zero-sync build that overlaps speculative steps; an ``in_graph_kinds`` proposer's step as a plain step (its
    forwards one graph). ``terms`` override the profile's time terms (the calibration varies them); a changed
    ``allreduce_latency_s`` moves the GPU time by the custom all-reduce latencies the step pays
    (``pieces.allreduce_step``), and that change is returned with the engine seconds."""
    t = {name: terms.get(name, getattr(profile, name)) for name in _TIME_TERMS}
    shift = t["allreduce_latency_s"] - profile.allreduce_latency_s
    spec, kind = np.asarray(pieces.speculative, dtype=bool), np.asarray(pieces.kind)
    in_graph = spec & np.isin(kind, profile.in_graph_kinds)  # one forward, one graph: a plain step's host time
    eager_step = _eager_extra(pieces.eager_step, t["launch_s"], in_graph, profile.graphs_target) \
        + shift * np.asarray(pieces.allreduce_step, dtype=float)
    eager_plain = _eager_extra(pieces.eager_plain, t["launch_s"]) + shift * np.asarray(pieces.allreduce_plain, dtype=float)
    critical = np.where(spec & ~in_graph, t["spec_step_s"] + t["draft_pass_s"] * pieces.passes, 0.0)
    gpu_step = pieces.gpu_step_s + eager_step
    gpu_plain = pieces.gpu_plain_s + eager_plain
    overlap_step = np.where(spec & ~in_graph, profile.overlap_spec, profile.overlap_plain)
    host = t["host_step_s"]
    hidden = spec & profile.spec_host_runs_ahead & np.isin(kind, ZERO_SYNC_KINDS)
    exposed_step = np.where(hidden, np.maximum(0.0, host + critical - gpu_step),
                            np.where(overlap_step, np.maximum(0.0, host - gpu_step), host) + critical)
    exposed_plain = np.maximum(0.0, host - gpu_plain) if profile.overlap_plain else host + 0.0 * gpu_plain
    return eager_step + exposed_step, eager_plain + exposed_plain

