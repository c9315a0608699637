"""Weight formats: the bytes a GEMM reads per weight (scales included) and the tensor-core rate it runs at.

A checkpoint's weights need not be stored in the dtype the step computes in (docs/model.md §3.8):
DeepSeek-V3 ships block-scaled fp8, gpt-oss its experts in MXFP4, AWQ/GPTQ checkpoints 4-bit integers, NVIDIA's
ModelOpt checkpoints NVFP4. Each format reads ``bits/8`` bytes per weight plus one scale (and zero point) per
group, and runs either on its own tensor-core kind where the GPU has one or, weight-only, dequantised to the
compute dtype inside the GEMM (vLLM's Marlin/Machete kernels) at that dtype's rate.

- bf16: 2 bytes per weight; bf16 rate.
- fp8 (E4M3, one fp32 scale per 128 × 128 block): 1 + 4/16384 bytes; the fp8 rate where the GPU has fp8
  tensor cores (activations quantised on the fly), else bf16 (weight-only).
- int4 (AWQ/GPTQ, fp16 scale + 4-bit zero per 128 weights): 0.5 + 2.5/128 bytes; bf16 rate (W4A16).
- mxfp4 (E2M1, one E8M0 byte per 32): 0.5 + 1/32 bytes; bf16 rate (weight-only).
- nvfp4 (E2M1, one E4M3 byte per 16, plus one fp32 per tensor): 0.5 + 1/16 bytes; the fp4 rate where the
  GPU has fp4 tensor cores (activations in NVFP4 too), else bf16.

Sources: fp8 block scaling, DeepSeek-V3 Technical Report (arXiv 2412.19437) §3.3.2 ("per-group scaling ...
128x128 block basis for weights", 1x128 tiles for activations) and its config's ``weight_block_size [128,
128]``; int4, AWQ (Lin et al., MLSys 2024) with vLLM's ``awq_marlin`` group size 128; MXFP4, the OCP
Microscaling Formats (MX) Specification v1.0 (32-element blocks, E8M0 shared scale) as gpt-oss ships it
(``quant_method mxfp4``); NVFP4, NVIDIA's NVFP4 format (16-element blocks, E4M3 scale, fp32 tensor scale;
Blackwell ``tcgen05.mma`` kind ``mxf4nvf4``, PTX ISA 8.7). MXFP4 runs weight-only at the compute dtype's rate
because the engines pair it with bf16 (Hopper) or fp8 (Blackwell, ``kind::mxf8f6f4`` at the fp8 rate)
activations, never fp4 ones. The LM head and embeddings stay in the compute dtype in all these checkpoints.
"""

from __future__ import annotations

from dataclasses import dataclass

from sdsl.errors import InvalidInputError

__all__ = ["WeightFormat", "WEIGHT_FORMATS", "get_weight_format", "gemm_peak"]


@dataclass(frozen=True)
class WeightFormat:
    """One weight format: ``bits`` per element, ``scale_bytes`` per group of ``group`` weights (0: no scales),
    and the tensor-core kind it runs on natively (``native``: "bf16", "fp8" or "fp4"), else weight-only at
    the compute dtype's rate (``native`` None)."""

    name: str
    bits: int
    group: int
    scale_bytes: float
    native: str | None
    source: str

    @property
    def bytes_per_weight(self) -> float:
        """Bytes read per weight, scales included: bits/8 + scale_bytes/group."""
        return self.bits / 8.0 + (self.scale_bytes / self.group if self.group else 0.0)


WEIGHT_FORMATS: dict[str, WeightFormat] = {f.name: f for f in (
    WeightFormat("bf16", 16, 0, 0.0, "bf16", "16-bit weights"),
    WeightFormat("fp16", 16, 0, 0.0, "bf16", "16-bit weights"),
    WeightFormat("fp32", 32, 0, 0.0, None, "32-bit weights"),
    WeightFormat("fp8", 8, 128 * 128, 4.0, "fp8",
                 "DeepSeek-V3 (arXiv 2412.19437) §3.3.2: E4M3, one fp32 scale per 128x128 weight block"),
    WeightFormat("int4", 4, 128, 2.5, None,
                 "AWQ/GPTQ W4A16, group 128: fp16 scale and 4-bit zero point per group (vLLM awq_marlin)"),
    WeightFormat("mxfp4", 4, 32, 1.0, None,
                 "OCP Microscaling Formats (MX) v1.0: E2M1 elements, one E8M0 scale per 32 (gpt-oss experts)"),
    WeightFormat("nvfp4", 4, 16, 1.0, "fp4",
                 "NVIDIA NVFP4: E2M1 elements, one E4M3 scale per 16 and one fp32 per tensor (ModelOpt)"),
)}
_ALIASES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float8": "fp8", "e4m3": "fp8", "awq": "int4",
            "gptq": "int4", "w4a16": "int4", "float32": "fp32"}


def get_weight_format(name: str) -> WeightFormat:
    """The :class:`WeightFormat` called ``name`` (bf16, fp16, fp32, fp8, int4 / awq / gptq, mxfp4, nvfp4)."""
    key = _ALIASES.get(str(name).lower(), str(name).lower())
    if key not in WEIGHT_FORMATS:
        raise InvalidInputError(f"Unknown weight format {name!r}; expected one of {', '.join(WEIGHT_FORMATS)}.")
    return WEIGHT_FORMATS[key]


def gemm_peak(hardware, weight_format: str, compute_dtype: str) -> float:
    """Dense tensor-core FLOP/s of a GEMM whose weights are in ``weight_format`` and whose activations are
    in ``compute_dtype``: the format's native kind where ``hardware`` has it (fp8: ``peak_flops_fp8``; fp4:
    ``peak_flops_fp4``), else the compute dtype's rate (:func:`sdsl.roofline.kernels.compute_peak`)."""
    from sdsl.roofline.kernels import compute_peak

    fmt = get_weight_format(weight_format)
    if fmt.native == "fp8" and getattr(hardware, "peak_flops_fp8", None):
        return hardware.peak_flops_fp8
    if fmt.native == "fp4" and getattr(hardware, "peak_flops_fp4", None):
        return hardware.peak_flops_fp4
    return compute_peak(hardware, compute_dtype)
