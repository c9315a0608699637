"""Choosing: ranking proposers × k (× trees) by predicted tokens/s per batch, the best-k table,
:func:`~sdsl.plan.plan.plan_speculation`, the tree search, the draft-size search, and the export of a pick
to an engine's configuration."""
