"""Options shared by `sdsl predict` and `sdsl optimize` for proposers and token trees (acceptance options
are the shared ones in :mod:`sdsl.cli._common`)."""

from __future__ import annotations

import click

__all__ = ["proposer_option", "tree_option"]

proposer_option = click.option(
    "--proposer", "proposers", multiple=True,
    help="draft:<model> | eagle | eagle3 | medusa | mtp | ngram (optimize: repeat to compare; 'all' = every head kind and n-gram lookup, MTP only where the target ships MTP modules).")
tree_option = click.option("--tree", default=None, help="Token tree STEPS,TOPK,TOKENS (SGLang's num-steps, eagle-topk, "
                                                        "num-draft-tokens), e.g. 8,8,64.")
