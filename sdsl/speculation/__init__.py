"""One speculative step priced: the proposers (draft model, EAGLE/Medusa/MTP heads, n-gram lookup), which
acceptance prices each (:mod:`.resolve`), :func:`~sdsl.speculation.step.price_step` and its
:class:`~sdsl.speculation.priced_step.PricedStep`, tokens/s and speed-up, and SDSL's analytic γ*."""
