"""Gecko (a simulated tool environment) and GATS (test-time refinement of tool calls against it).

Paper: "Gecko: ... simulated tool environments" with GATS, arXiv 2602.19218 (code: camel-ai/gecko).
Gecko checks tool names and arguments against the tool schemas, synthesises schema-conforming,
state-consistent responses and judges task completion against the user's objective; GATS lets the
agent refine its calls against these three kinds of feedback in simulation (a few retries) before
the final calls run on the real tools. See ``seeds/gats.md``.

Modules: :mod:`.tools` (the help-desk tool suite, its JSON schemas, the real backend with hidden
state, task generator), :mod:`.simulator` (the Gecko stand-in: sees schemas and call history
only), :mod:`.agent` (tiny decoder agent, constrained re-decoding), :mod:`.refine` (GATS and the
baselines), :mod:`.experiment` (the run).
"""

#: the arms compared at equal agent samples per task
ARMS = ("single", "self-consistency", "real-refine", "gats", "gats-no-validity", "gats-no-response",
        "gats-no-judge")
#: the three feedback kinds of the simulator
FEEDBACK = ("validity", "response", "judge")
