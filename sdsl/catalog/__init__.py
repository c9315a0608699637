"""What is priced, as data: model shapes (catalog entries and HF ``config.json`` files, dense, MoE and MLA),
accelerators, draft-head shapes and dtypes, each catalogued number with its source (``sdsl/data/*.toml``)."""
