"""RADAR: query-adaptive multi-agent communication topologies by autoregressive graph diffusion.

"RADAR: Redundancy-Aware ... graph Diffusion for multi-Agent topologies", arXiv 2605.09907
(code: cszhangzhen/RADAR). Successful communication graphs are collected from fixed topologies; a
GraphARM-style autoregressive diffusion model (an ordering network trained by REINFORCE with reward =
-denoising loss, and a query-conditioned denoising network that predicts the next agent's role and its
edges, with a structural-hole feature: Burt's effective size) learns to generate them; RL fine-tuning
rewards correctness and sparsity; one graph is generated per query. See ``seeds/radar.md``.

Modules: :mod:`.agents` (problems, tiny solver agents, executing a graph, token counts),
:mod:`.generator` (effective size, denoising and ordering networks, one-shot baseline, training),
:mod:`.experiment` (the run).
"""

#: agent roles (a role is a training mix of the shared tiny solver)
ROLES = ("adder", "multiplier", "generalist")
#: compared topologies: fixed ones, a one-shot generator and RADAR
ARMS = ("single", "chain", "star", "complete", "random", "layered", "one-shot", "radar")
