"""Seg-ReSearch: segmentation that interleaves search calls with reasoning, trained by GRPO with a
hierarchical reward (outcome: mask IoU, box, point; process: initial guidance + bounded search
incentive).

Stand-in for arXiv 2602.04454 (code: github iSEE-Laboratory/Seg-ReSearch) on rendered scenes and a
knowledge base of fictional facts. See ``seeds/seg-research.md``.

Modules: :mod:`.world` (scenes, knowledge base, questions, BM25 retriever, point+box -> mask, J&F),
:mod:`.reward` (the hierarchical reward and its baselines), :mod:`.policy` (the search-then-answer
policy and GRPO), :mod:`.experiment` (the run).
"""

#: the arms: the hierarchical reward, outcome-only reward, rigid step-wise reward, no search
ARMS = ("hierarchical", "outcome", "stepwise", "no-search")
