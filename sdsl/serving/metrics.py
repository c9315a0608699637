"""Per-request and aggregate metrics of a serving simulation.

Per request: end-to-end latency (finish − arrival), TTFT (first token − arrival, queueing and
prefill included) and TPOT ((finish − first token) / (output − 1), requests with > 1 output token).
Overall: output tokens per second over the makespan (first arrival to last finish), latency
percentiles p50/p90/p99, and the mean speculation length k (averaged over request-steps).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sdsl._result import Result, plain

__all__ = ["SimResult", "SUMMARY_KEYS"]

SUMMARY_KEYS = ("qps", "policy", "mean_latency_s", "p99_latency_s", "ttft_s", "tpot_s", "tokens_per_s", "mean_k")


@dataclass(frozen=True)
class SimResult(Result):
    """Outcome of :func:`~sdsl.serving.simulator.simulate`: per-request arrays and a summary.

    Result protocol: ``report()`` (one line), ``to_dict()`` (the summary and the simulator's
    stats), ``to_json(path=None)``, ``plot(ax=None)`` (CDFs of request latency and TTFT).
    """

    policy: str
    qps: float
    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    alpha: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray
    emitted: np.ndarray
    k_sum: np.ndarray
    steps: np.ndarray
    stats: dict = field(default_factory=dict)
    drawn: np.ndarray | None = None  # tokens the decode steps produced before the output-length cut

    @classmethod
    def from_arrays(cls, workload, policy, first_token_s, finish_s, emitted, k_sum, steps, qps, stats, drawn=None):
        return cls(policy=policy, qps=float(qps), arrival_s=workload.arrival_s, prompt_tokens=workload.prompt_tokens,
                   output_tokens=workload.output_tokens, alpha=workload.alpha, first_token_s=first_token_s,
                   finish_s=finish_s, emitted=emitted, k_sum=k_sum, steps=steps, stats=dict(stats), drawn=drawn)

    @property
    def latency_s(self) -> np.ndarray:
        return self.finish_s - self.arrival_s

    @property
    def ttft_s(self) -> np.ndarray:
        return self.first_token_s - self.arrival_s

    @property
    def tpot_s(self) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.output_tokens > 1,
                            (self.finish_s - self.first_token_s) / (self.output_tokens - 1), np.nan)

    def requests(self):
        """One row per request (pandas DataFrame)."""
        import pandas as pd

        with np.errstate(invalid="ignore", divide="ignore"):
            mean_k = np.where(self.steps > 0, self.k_sum / np.maximum(self.steps, 1), 0.0)
        return pd.DataFrame({"arrival_s": self.arrival_s, "prompt_tokens": self.prompt_tokens,
                             "output_tokens": self.output_tokens, "alpha": self.alpha, "ttft_s": self.ttft_s,
                             "latency_s": self.latency_s, "tpot_s": self.tpot_s, "mean_k": mean_k,
                             "decode_steps": self.steps})

    def summary(self) -> dict:
        lat = self.latency_s
        tpot = self.tpot_s
        span = float(np.max(self.finish_s) - np.min(self.arrival_s))
        p50, p90, p99 = (float(v) for v in np.percentile(lat, [50, 90, 99]))
        steps = float(self.steps.sum())
        return {
            "qps": self.qps,
            "policy": self.policy,
            "mean_latency_s": float(lat.mean()),
            "p50_latency_s": p50,
            "p90_latency_s": p90,
            "p99_latency_s": p99,
            "ttft_s": float(self.ttft_s.mean()),
            "tpot_s": float(np.nanmean(tpot)) if np.isfinite(tpot).any() else float("nan"),
            "tokens_per_s": float(self.emitted.sum() / span) if span > 0 else float("nan"),
            "mean_k": float(self.k_sum.sum() / steps) if steps else 0.0,
            "requests": int(len(lat)),
            "mean_batch": float(self.stats.get("mean_batch", float("nan"))),
        }

    def report(self) -> str:
        s = self.summary()
        return (f"{s['policy']:>12} @ {s['qps']:g} QPS: mean {s['mean_latency_s']:.3f} s, p99 {s['p99_latency_s']:.3f} s, "
                f"TTFT {s['ttft_s'] * 1e3:.1f} ms, TPOT {s['tpot_s'] * 1e3:.2f} ms, {s['tokens_per_s']:.0f} tok/s, "
                f"mean k {s['mean_k']:.2f}, mean batch {s['mean_batch']:.1f}")

    def to_dict(self) -> dict:
        return plain({**self.summary(), "stats": self.stats})

    def plot(self, ax=None):
        """Empirical CDFs of end-to-end latency and time to first token (:mod:`sdsl.plots.results`)."""
        from sdsl.plots.results import plot_latency_cdf

        return plot_latency_cdf(self.latency_s, self.ttft_s, ax=ax, title=f"{self.policy} @ {self.qps:g} QPS")
