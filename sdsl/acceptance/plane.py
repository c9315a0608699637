"""Pre-training loss laws and SDSL's acceptance plane. Summary of docs/model.md §3.2.

- Loss law: Hoffmann et al., "Training Compute-Optimal LLMs" (Chinchilla, 2022), Eq. (2) /
  Approach 3: L(N, D) = E + A/N^a + B/D^b, fitted E=1.69, A=406.4, B=410.7, a=0.34, b=0.28.
- Acceptance plane: Bozorgkhoo & Molybog, "Speculative Decoding Scaling Laws (SDSL)",
  arXiv 2603.11053 (2026): α = A·x + B·y + C with x = draft perplexity, y = target perplexity,
  A = −0.0067, B = 0.01297, C = 0.642 (R² = 0.60, HellaSwag, 13 targets × OPT/Qwen drafts).
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass

import numpy as np

from sdsl.errors import InvalidInputError

__all__ = [
    "LossLaw",
    "CHINCHILLA",
    "AcceptancePlane",
    "SDSL_PLANE",
    "AlphaClippedWarning",
    "perplexity",
    "acceptance_from_sizes",
]


class AlphaClippedWarning(UserWarning):
    """The acceptance plane produced α outside (0, 1) and the value was clipped."""


@dataclass(frozen=True)
class LossLaw:
    """Chinchilla-form pre-training loss L(N, D) = E + A/N^a + B/D^b (nats per token).

    Hoffmann et al. (2022), Eq. (2); defaults are their Approach-3 fit. Replace the constants to
    use another law (e.g. a refit on a different tokenizer).
    """

    E: float = 1.69
    A: float = 406.4
    B: float = 410.7
    a: float = 0.34
    b: float = 0.28
    source: str = "Hoffmann et al. 2022 (Chinchilla), Eq. (2), Approach 3 fit"

    def loss(self, params, tokens) -> np.ndarray:
        """Loss in nats/token for ``params`` parameters trained on ``tokens`` tokens (Hoffmann et al.
        2022, Eq. 2; broadcasts)."""
        n = np.asarray(params, dtype=float)
        d = np.asarray(tokens, dtype=float)
        if np.any(~(n > 0)) or np.any(~(d > 0)):
            raise InvalidInputError("Parameter and token counts must be positive.")
        return self.E + self.A / n**self.a + self.B / d**self.b

    def to_dict(self) -> dict:
        return asdict(self)


CHINCHILLA = LossLaw()
"""Chinchilla's loss law L(N, D) with Hoffmann et al. (2022)'s fitted constants (docs/model.md §1)."""


def perplexity(params, tokens, law: LossLaw = CHINCHILLA) -> np.ndarray:
    """Perplexity exp(L(N, D)) predicted by the loss law (SDSL §3: perplexity = exp(loss))."""
    return np.exp(law.loss(params, tokens))


@dataclass(frozen=True)
class AcceptancePlane:
    """SDSL's linear acceptance model α = A·ppl_draft + B·ppl_target + C (arXiv 2603.11053)."""

    A: float = -0.0067
    B: float = 0.01297
    C: float = 0.642
    r2: float = 0.60
    source: str = "Bozorgkhoo & Molybog 2026 (SDSL), arXiv 2603.11053, acceptance plane fit"

    def raw(self, ppl_draft, ppl_target) -> np.ndarray:
        """The plane's value before any range handling (may leave (0, 1))."""
        x = np.asarray(ppl_draft, dtype=float)
        y = np.asarray(ppl_target, dtype=float)
        return self.A * x + self.B * y + self.C

    def alpha(self, ppl_draft, ppl_target, *, out_of_range: str = "clip", eps: float = 1e-6) -> np.ndarray:
        """α from the plane. ``out_of_range``: "clip" (to [eps, 1−eps], with an AlphaClippedWarning
        saying how many values moved), "nan" (mark them NaN) or "raise" (InvalidInputError)."""
        a = self.raw(ppl_draft, ppl_target)
        outside = ~((a > 0) & (a < 1))
        if np.any(outside):
            n = int(np.count_nonzero(outside))
            if out_of_range == "raise":
                raise InvalidInputError(
                    f"The SDSL acceptance plane gives alpha outside (0, 1) for {n} input(s) (first: {a[outside].ravel()[0]:.3g})."
                )
            if out_of_range == "nan":
                a = np.where(outside, np.nan, a)
            elif out_of_range == "clip":
                warnings.warn(
                    f"SDSL acceptance plane: {n} alpha value(s) outside (0, 1) clipped to [{eps}, {1 - eps}].",
                    AlphaClippedWarning,
                    stacklevel=2,
                )
                a = np.clip(a, eps, 1 - eps)
            else:
                raise InvalidInputError('out_of_range must be "clip", "nan" or "raise".')
        return a

    def to_dict(self) -> dict:
        return asdict(self)


SDSL_PLANE = AcceptancePlane()
"""SDSL's fitted acceptance plane α(draft perplexity, target perplexity) (Bozorgkhoo & Molybog; docs/model.md §3.2)."""


def acceptance_from_sizes(
    draft_params,
    target_params,
    draft_tokens=1e12,
    target_tokens=1e12,
    *,
    law: LossLaw = CHINCHILLA,
    plane: AcceptancePlane = SDSL_PLANE,
    out_of_range: str = "clip",
) -> np.ndarray:
    """α predicted from model sizes and pre-training tokens (SDSL): perplexities from the loss law,
    then the acceptance plane. Defaults D = D′ = 1e12 tokens (docs/model.md §3.2)."""
    x = perplexity(draft_params, draft_tokens, law)
    y = perplexity(target_params, target_tokens, law)
    return plane.alpha(x, y, out_of_range=out_of_range)
