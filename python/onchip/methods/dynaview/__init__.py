"""A schema-guided dynamics world model in the spirit of DynaVieW (seed #6; the paper's details are
not public - built from its abstract): interleaved keyframe states and hierarchical schema transitions
(event, actor, attribute, change), joint transition prediction and state simulation, a mixture of
experts with selective attention across experts, and a loss that re-weights schema tokens.
See ``seeds/dynaview.md``. Modules: :mod:`.world` (sprite world), :mod:`.experiment` (model, training,
evaluation, the run).
"""

#: full model and its ablations
VARIANTS = ("full", "dense", "no-selective", "no-reweight", "separate")
