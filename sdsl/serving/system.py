"""A serving deployment: step-time tables plus the KV-cache budget with and without the draft."""

from __future__ import annotations

from dataclasses import dataclass

from sdsl.errors import InvalidInputError
from sdsl.serving.step_model import BatchStepModel, MemoryBudget, memory_budget

__all__ = ["ServingSystem"]


@dataclass(frozen=True)
class ServingSystem:
    """What the simulator needs of a deployment.

    ``step_model`` prices steps; ``budget_spec`` is the KV budget when the draft is loaded (its
    weights and KV cost memory), ``budget_plain`` when it is not (policy ``none``).
    """

    step_model: BatchStepModel
    budget_spec: MemoryBudget | None
    budget_plain: MemoryBudget | None
    kv_budget_override: int | None = None
    name: str = ""

    def kv_budget_tokens(self, with_draft: bool) -> int:
        """Tokens of KV cache (target + draft per token) that running requests may reserve."""
        if self.kv_budget_override is not None:
            return int(self.kv_budget_override)
        b = self.budget_spec if with_draft else self.budget_plain
        if b is None:
            raise InvalidInputError("This serving system has no memory budget; give kv_budget_override.")
        return b.kv_budget_tokens

    @classmethod
    def from_catalog(cls, target, draft, deployment, *, draft_params=None, mem_fraction: float = 0.9,
                     max_batch: int = 256, max_k: int = 7, max_context: int | None = None,
                     max_prompt: int | None = None, spec_overhead_frac: float = 0.0) -> "ServingSystem":
        """Roofline step times and memory budgets of catalog models on ``deployment`` (a
        :class:`~sdsl.roofline.deployment.Deployment` or a hardware name/file/Hardware)."""
        from sdsl.catalog.models import get_model
        from sdsl.roofline.deployment import Deployment

        t = get_model(target)
        dep = Deployment.of(deployment)
        kwargs = dict(max_batch=max_batch, max_k=max_k, max_context=max_context or t.max_context,
                      max_prompt=max_prompt, spec_overhead_frac=spec_overhead_frac)
        model = BatchStepModel.from_catalog(t, draft, dep, draft_params=draft_params, **kwargs)
        spec = memory_budget(t, dep, draft=draft, mem_fraction=mem_fraction) if draft else None
        plain = memory_budget(t, dep, mem_fraction=mem_fraction)
        return cls(model, spec, plain, name=f"{model.name} on {dep.hardware.name} (tp={dep.tp})")
