"""``sdsl validate decoder``: the reference speculative decoder's measured rows (CPU and GPU), priced leak-free.

``validation`` reads and prices the committed rows, ``pricing`` holds the held-out CPU fits and the step's terms,
``heads`` and ``synthetic`` the EAGLE-head and synthetic-acceptance sweeps, ``smollm2_pricing`` the SmolLM2 rows,
``synthetic_terms`` the CPU GEMM row factor, ``extensions`` the three extension runs, ``row_cache`` the per-run cache.
"""
