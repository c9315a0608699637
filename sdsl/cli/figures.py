"""`sdsl figures`: regenerate the paper figures (PNG) from the registry in :mod:`sdsl.validation.figures`."""

from __future__ import annotations

import click


@click.command()
@click.option("-o", "--out", "out_dir", default="paper_figures", show_default=True,
              type=click.Path(file_okay=False), help="Folder to write the PNGs into.")
@click.option("--only", multiple=True, help="Make only this figure (file name, .png optional); repeatable.")
@click.option("--list", "list_only", is_flag=True, help="List the figures (name, description, data source) and exit.")
@click.option("--quick", is_flag=True, help="Coarser grids (seconds instead of a minute); for tests.")
def figures(out_dir, only, list_only, quick):
    """Regenerate every paper figure as PNG (SDSL, Leviathan, TurboSpec-style, validation).

    Each figure is drawn by a function in the package (see sdsl/validation/figures/) and written
    atomically; paper_figures/README.md says what each shows and how it compares with the papers.
    """
    from sdsl.validation.figures import FIGURES, make_figures

    if list_only:
        width = max(len(e.name) for e in FIGURES)
        for e in FIGURES:
            click.echo(f"{e.name:<{width}}  {e.description}  [data: {e.source}]")
        return
    import matplotlib

    matplotlib.use("Agg")
    paths = make_figures(out_dir, only=list(only) or None, quick=quick, progress=True)
    click.echo(f"wrote {len(paths)} figure(s) to {out_dir}")
