"""What the serving engine adds around the GPU work: dated execution profiles per engine build (host time
per step and per draft pass, CUDA graphs or eager launches, overlap), kernel-launch costs and the engine's
own all-reduce."""
