"""The GPU time of one forward pass: latency parameters fitted on measured operator timings, kernel
efficiency forms, the per-layer operations (dense, MoE, MLA, attention, all-reduce) and the forward step of a
:class:`~sdsl.roofline.deployment.Deployment` (target, GPU, engine, tensor/expert parallelism)."""
