"""`sdsl hardware`, `sdsl models` and `sdsl engines`: list the catalogs."""

from __future__ import annotations

import click

from sdsl.cli._common import echo_json, format_table, json_option


@click.command()
@json_option
def hardware(as_json):
    """List the hardware catalog.

    List the hardware catalog: architecture, memory, dense bf16/fp8 TFLOP/s, bandwidth, SMs/CUs, L2,
    GPU-to-GPU link per direction, whether its latency parameters are fitted on measured kernels (which source
    and engine version) or transferred from the GPUs that are, and every entry's sources.

    Examples:

    \b
        sdsl hardware
        sdsl hardware --json
    """
    from sdsl.catalog.hardware import list_hardware
    from sdsl.roofline.latency_params import calibration_provenance

    entries = list_hardware()
    rows = [h.to_human() for h in entries]
    for r, h in zip(rows, entries):
        r["latency_calibration"] = calibration_provenance(h)
    if as_json:
        echo_json(rows)
        return
    for r in rows:
        r["latency"] = r["latency_calibration"]["kind"]
    keys = ["name", "kind", "architecture", "memory_type", "bf16_tflops", "fp8_tflops", "mem_bandwidth_gbs", "mem_gb",
            "sm_count", "l2_mb", "interconnect_gbs", "latency"]
    table_rows = [{k: ("-" if r.get(k) is None else (f"{r[k]:g}" if isinstance(r[k], float) else r[k])) for k in keys}
                  for r in rows]
    click.echo(format_table(table_rows, [(k, k, "") for k in keys]))
    click.echo("\nDense figures (datasheet 'with sparsity' / 2); interconnect_gbs per direction; mem_gb is the datasheet's "
               "GB, which is binary (GiB); '-' = not published.")
    click.echo("Latency parameters (default_params): 'measured' = fitted on measured kernels, 'transferred' = the "
               "cross-GPU efficiency model from the measured GPUs (nothing measured on it), 'uncalibrated' = assumed "
               "defaults. Measured on:")
    for r in rows:
        cal = r["latency_calibration"]
        if cal["kind"] == "measured":
            borrowed = f"; transferred: {', '.join(cal['transferred'])}" if cal["transferred"] else ""
            click.echo(f"  {r['name']}: {'; '.join(cal['sources'])}{borrowed}")
    click.echo("Sources:")
    for r in rows:
        click.echo(f"  {r['name']}: {r['source']}")


@click.command()
@json_option
def models(as_json):
    """List the model catalog.

    List the model catalog: shapes and exact parameter counts, with the published counts.

    Examples:

    \b
        sdsl models
        sdsl models --json
    """
    from sdsl.catalog.models import list_models

    specs = list_models()
    if as_json:
        echo_json([{**s.to_dict(), "total_params": s.total_params, "non_embedding_params": s.non_embedding_params}
                   for s in specs])
        return
    rows = [{"name": s.name, "family": s.family, "params": f"{s.total_params / 1e9:.3f}B", "layers": s.n_layer,
             "d_model": s.d_model, "heads": f"{s.n_head}/{s.n_kv_head}", "d_ff": s.d_ff, "vocab": s.vocab_size}
            for s in specs]
    click.echo(format_table(rows, [(k, k, "") for k in rows[0]]))


@click.command()
@json_option
def engines(as_json):
    """List the engine execution profiles (--engine).

    List the engine execution profiles (sdsl/data/engines/profiles.json): name, engine, date, the host terms
    (fitted ones marked *), the tensor-parallel all-reduce (NCCL, or the engine's custom kernel and its latency), CUDA
    graphs, the GEMM source an H100 step is priced on, whose measured decode-attention kernels it prices, overlap, and
    what each build is. `--engine ENGINE` takes the
    newest of an engine, `--engine ENGINE:YYYY-MM` the newest not after that month.

    Examples:

    \b
        sdsl engines
        sdsl engines --json
    """
    from sdsl.engine.profiles import FREE_TERMS, engine_profiles
    from sdsl.roofline.latency_params import runs_table_gemms, table_engine

    profiles = list(engine_profiles().values())
    if as_json:
        echo_json([{**p.to_dict(), "table_gemms": runs_table_gemms(p), "table_attention": table_engine(p)}
                   for p in profiles])
        return
    rows = []
    for p in profiles:
        src = {t: p.sources.get(t) or {} for t in FREE_TERMS}
        measured = {t for t, v in src.items() if v.get("fit") == "measured"}
        fitted = {t for t, v in src.items() if (v.get("fit") or "inherit" in v) and t not in measured}
        ms = lambda t: f"{1e3 * getattr(p, t):.3f}" + ("*" if t in fitted else "")  # noqa: E731
        graphs = "".join(c if f else "-" for c, f in zip("TDE", (p.graphs_target, p.graphs_draft, p.graphs_extend)))
        rows.append({"name": p.name, "engine": p.engine, "date": p.date or "-", "host ms": ms("host_step_s"),
                     "spec ms": ms("spec_step_s"), "pass ms": ms("draft_pass_s"),
                     "launch us": f"{1e6 * p.launch_s:.1f}",
                     "all-reduce": "nccl" if p.allreduce == "nccl" else
                     f"custom {1e6 * p.allreduce_latency_s:.1f} us" + ("*" if "allreduce_latency_s" in fitted else
                                                                      " measured" if "allreduce_latency_s" in measured else ""),
                     "graphs": graphs, "H100 GEMMs": "vLLM 0.24" if runs_table_gemms(p) else "Vidur 2024",
                     "attention": f"{table_engine(p)} tables" if table_engine(p) else "roofline",
                     "overlap": ("P" if p.overlap_plain else "-") + ("S" if p.overlap_spec else "-")
                     + ("Z" if p.spec_host_runs_ahead else "") + ("G" if p.in_graph_kinds else "")})
    click.echo(format_table(rows, [(k, k, "") for k in rows[0]]))
    click.echo("\n* fitted on published rows (leave-one-source-out in the file); measured: in NVIDIA's operator tables "
               "(aiconfigurator-core 0.12.0; `sdsl validate kernels`); graphs: T target, D drafting passes, E draft extend; "
               "overlap: P plain steps, S speculative steps (H), Z zero-sync (S and d too, for EAGLE, EAGLE-3 and MTP), "
               "G one-graph speculation (its proposers' steps pay a plain step's host time: TensorRT-LLM's MTP); "
               "H100 GEMMs: the bf16 GEMM fit an H100 step is priced on (vLLM 0.24.0's measured tables for vLLM builds "
               "from 2026, Vidur's 2024 timings otherwise; every other GPU has one source); attention: whose measured "
               "decode-attention kernels a GQA layer is priced on, on the GPUs the tables cover (MLA keeps the roofline). "
               "Engines without measured kernel tables (gpt-fast, llama.cpp, Hugging Face eager) keep terms fitted or "
               "sourced only.")
    for p in profiles:
        click.echo(f"  {p.name}: {p.build}")
