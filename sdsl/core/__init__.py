"""The numpy core: models, hardware, the roofline step time, acceptance, proposers and the one priced
speculative step (:func:`sdsl.core.speculation.price_step`) every ranking, search and simulator table
consumes. How each piece is modelled, with its sources: docs/model.md.
"""
