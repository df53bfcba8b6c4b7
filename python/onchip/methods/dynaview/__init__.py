"""A schema-guided dynamics world model in the spirit of DynaVieW (seed #6): interleaved keyframe
states and hierarchical schema transitions (event, actor, attribute, change), joint transition
prediction and state simulation, a mixture of experts with selective attention across experts, and a
loss that re-weights schema tokens. Built from the abstract before the public code (github
Silin159/DynaVieW) was found; its selective attention and schema loss differ from the guesses here,
see ``seeds/dynaview.md``. Modules: :mod:`.world` (sprite world), :mod:`.experiment` (model, training,
evaluation, the run).
"""

#: full model and its ablations
VARIANTS = ("full", "dense", "no-selective", "no-reweight", "separate")
