"""Coarse-to-fine 1D ordered tokens vs a 2D raster grid under test-time search.

"Searching over ordered tokens" (arXiv 2604.15453; public code: EPFL-VILAB/search-over-tokens):
the same autoregressive generator over two token structures with the same token count and
codebook, searched at test time under a verifier with best-of-N, beam search over token
prefixes, lookahead and a uniform (AR-free) prior. Here on 8x8 digits: tokenizers, class-
conditional priors, verifier, evaluator and feature network are all trained in the project.
See ``seeds/token-search.md``.

Modules: :mod:`.tokenizers` (FSQ, the ordered 1D tokenizer with nested dropout, the grid
tokenizer), :mod:`.models` (data, classifiers, AR prior, Frechet distance), :mod:`.search`
(call counting, best-of-N, beam, lookahead), :mod:`.experiment` (the run).
"""

# the names live here, free of torch, so the command line can offer them without loading it
#: token structures: coarse-to-fine 1D tokens (nested dropout) and a 2D raster grid of patches
TOKENIZERS = ("ordered", "grid")
#: search algorithms; "sample" is one AR sample (no search), "uniform" is beam search with a uniform prior
SEARCHES = ("bon", "beam", "lookahead", "uniform", "sample")
