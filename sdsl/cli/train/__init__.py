"""``sdsl train-family`` and ``sdsl train-head``: train the reference models (torch)."""
