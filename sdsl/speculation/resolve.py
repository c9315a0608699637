"""Which acceptance prices a proposer: the one the caller gives, else the first rule that knows one.
Summary of docs/model.md §3.2 (SDSL's plane) and §3.5 (proposers); every pricing path resolves here.

:func:`resolve_acceptance` returns one :class:`~sdsl.acceptance.Acceptance` whose ``source`` says
where it came from. Given acceptance wins (an :class:`Acceptance`, an i.i.d. α, or a mapping from proposer
name or kind to either); otherwise the rules of :data:`ACCEPTANCE_RULES` are asked in order and the first
answer prices the proposer: the published catalog on the same target and workload
(:func:`~sdsl.acceptance.rules.catalog_same_target_rule`; a draft model only when the catalog has
that pair), SDSL's acceptance plane for a separate draft model (:func:`sdsl_plane_rule`, arXiv 2603.11053: α
from both models' perplexities through the loss law), then the catalog's transfer across targets and
workloads for heads and lookup (:func:`~sdsl.acceptance.rules.catalog_transfer_rule`). The
``workload`` option (default "chat") picks the catalog's tasks. A proposer no rule knows is a one-line
:class:`~sdsl.errors.InvalidInputError` naming what to give.
"""

from __future__ import annotations

from typing import Callable, Mapping

import numpy as np

from sdsl.acceptance.rules import catalog_same_target_rule, catalog_transfer_rule, check_workload
from sdsl.acceptance.tau import check_alpha
from sdsl.acceptance.vector import Acceptance
from sdsl.errors import InvalidInputError

__all__ = ["resolve_acceptance", "acceptance_levels", "given_acceptance", "sdsl_plane_rule", "ACCEPTANCE_RULES",
           "PLANE_SOURCE"]

PLANE_SOURCE = "sdsl-plane"


def sdsl_plane_rule(proposer, target, *, draft_tokens=1e12, target_tokens=1e12, law=None, plane=None, **_):
    """SDSL's acceptance plane for a draft model with a catalog shape (α from both sizes and the pre-training
    tokens D, D′ through the loss law; docs/model.md §3.2); None for any other proposer. Options other rules
    read (a workload, say) are ignored."""
    from sdsl.catalog.models import ModelSpec
    from sdsl.acceptance.plane import CHINCHILLA, SDSL_PLANE, acceptance_from_sizes

    model = getattr(proposer, "model", None)
    if getattr(proposer, "kind", None) != "draft" or not isinstance(model, ModelSpec):
        return None
    a = acceptance_from_sizes(model.total_params, target.total_params, draft_tokens, target_tokens,
                              law=law or CHINCHILLA, plane=plane or SDSL_PLANE)
    return Acceptance((float(a),), 1.0, PLANE_SOURCE)


#: Rules asked in order when no acceptance is given: ``rule(proposer, target, **options)`` → Acceptance or None
#: (every rule takes every option and ignores those it does not read).
ACCEPTANCE_RULES: tuple[Callable, ...] = (catalog_same_target_rule, sdsl_plane_rule, catalog_transfer_rule)


def _as_acceptance(spec) -> Acceptance:
    if isinstance(spec, Acceptance):
        return spec
    return Acceptance.from_iid(float(check_alpha(spec)))


def given_acceptance(proposer, given):
    """The caller's acceptance for ``proposer`` (a mapping is looked up by name, then by kind), or None."""
    if isinstance(given, Mapping):
        return given.get(proposer.name, given.get(proposer.kind))
    return given


def resolve_acceptance(proposer, target, given=None, *, rules=None, **options) -> Acceptance:
    """The acceptance that prices ``proposer`` on ``target`` (module docstring): ``given`` (an Acceptance, an
    i.i.d. α, or a mapping name/kind → either) when it has one for this proposer, else the first of ``rules``
    (default :data:`ACCEPTANCE_RULES`) that answers; ``options`` (``workload``, ``spread_k``, ``draft_tokens``,
    ``target_tokens``, ``law``, ``plane``) go to every rule."""
    from sdsl.catalog.models import get_model
    from sdsl.speculation.proposers import make_proposer

    proposer = make_proposer(proposer)
    spec = given_acceptance(proposer, given)
    if spec is not None:
        return _as_acceptance(spec)
    target = get_model(target)
    if "workload" in options:
        options = {**options, "workload": check_workload(options["workload"])}
    for rule in ACCEPTANCE_RULES if rules is None else rules:
        found = rule(proposer, target, **options)
        if found is not None:
            return found
    raise InvalidInputError(f"{proposer.name} needs a measured acceptance (no acceptance rule, the catalog's included, "
                            f"knows it): --acceptance-for {proposer.name}=TAU@K, --alpha, --accepted-length (with "
                            "--accepted-at), --acceptance or --acceptance-file.")


def acceptance_levels(proposer, target, given=None, **options) -> tuple:
    """Acceptance levels that price ``proposer`` in a sweep: one :class:`Acceptance` per level. ``given`` (or
    its mapping entry for this proposer) may be a sequence of levels — i.i.d. α values or Acceptance objects;
    anything else resolves to one level through :func:`resolve_acceptance`."""
    from sdsl.speculation.proposers import make_proposer

    proposer = make_proposer(proposer)
    spec = given_acceptance(proposer, given)
    if isinstance(spec, np.ndarray) or isinstance(spec, (list, tuple)):
        levels = list(np.atleast_1d(spec)) if isinstance(spec, np.ndarray) else list(spec)
        if not levels:
            raise InvalidInputError(f"No acceptance level given for {proposer.name}.")
        return tuple(_as_acceptance(a) for a in levels)
    return (resolve_acceptance(proposer, target, spec, **options),)
