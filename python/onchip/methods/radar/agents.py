"""Multi-step arithmetic queries, tiny solver agents with roles, and executing a communication graph.

A query is ``start x0`` followed by ``d`` operations (``add a`` / ``times a``, modulo 10); its
difficulty is ``d``. An agent of a role is a small learned step solver (:class:`StepSolver`, an MLP
trained here on a small sample of arithmetic steps from its role's mix: the adder sees mostly
additions, the multiplier mostly multiplications, the generalist both), so roles err differently and
errors compound on long chains. An agent writes a rationale (its running values) and an answer,
sampled from its solver's softmax, so two agents of one role are two different samples. On top of its
solver's own errors, an agent loses track with a probability that grows with the step's position in the
chain (:func:`slip_probability`; a stand-in for reasoning that drifts on long problems) and writes a
random digit: one agent suffices on a 1-2 operation query, while on a 5-6 operation query it is wrong
about half the time and independent votes of more agents recover the answer.

Communication (a stand-in for the paper's LLM messages): along each edge u -> v the receiver gets u's
rationale, answer and vote count; v's answer is the majority of its own answer (one vote) and the
answers its in-neighbours pass on (with their vote counts; ties keep its own). The graph's answer is
the one of the last agent in topological order. Tokens are counted from the real message lengths: each
agent's prompt (query, role, every incoming message) plus its completion.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import ROLES

OPS = ("add", "times")
#: role -> (probability of "add" per training step, unused)
ROLE_MIX = {"adder": (0.85, 0), "multiplier": (0.15, 0), "generalist": (0.5, 0)}
#: per-step growth of an agent's probability of losing track (:func:`slip_probability`), and its cap
SLIP_PER_STEP = 0.08
SLIP_CAP = 0.5
#: steps at the start of a query on which an agent never loses track
SLIP_FREE_STEPS = 2


@dataclass(frozen=True)
class Query:
    """``start``, the operations ``ops`` ((op, operand) pairs) and the answer (mod 10)."""

    start: int
    ops: tuple

    @property
    def difficulty(self) -> int:
        return len(self.ops)

    @property
    def text(self) -> str:
        return "start " + " ".join([str(self.start)] + [f"{o} {a}" for o, a in self.ops])

    def values(self) -> list[int]:
        """Running values after each operation (the gold rationale)."""
        v, out = self.start, []
        for o, a in self.ops:
            v = (v + a) % 10 if o == "add" else (v * a) % 10
            out.append(v)
        return out

    @property
    def answer(self) -> int:
        return self.values()[-1]


def make_query(rng: np.random.Generator, difficulty: int, p_add: float = 0.5) -> Query:
    """A random query with ``difficulty`` operations (each an addition with probability ``p_add``)."""
    ops = tuple(("add", int(rng.integers(1, 10))) if rng.random() < p_add else ("times", int(rng.integers(2, 10)))
                for _ in range(difficulty))
    return Query(int(rng.integers(10)), ops)


def query_features(q: Query, max_difficulty: int = 6) -> np.ndarray:
    """The query embedding the generators are conditioned on: one-hot length, share of additions and of
    multiplications, ``(max_difficulty + 2,)`` float32 (a bag-of-tokens stand-in for a sentence encoder)."""
    f = np.zeros(max_difficulty + 2, np.float32)
    f[min(q.difficulty, max_difficulty) - 1] = 1
    n_add = sum(o == "add" for o, _ in q.ops)
    f[-2], f[-1] = n_add / q.difficulty, 1 - n_add / q.difficulty
    return f


class StepSolver:
    """One role's learned arithmetic step: an MLP from (value, op, operand) one-hots to the next value.

    Trained here on a small sample of steps from the role's mix (:data:`ROLE_MIX`), so the steps it saw
    rarely (the adder's multiplications) are often wrong; applied step by step, its errors compound with
    the query's length. ``weights`` are the torch module's parameters.
    """

    def __init__(self, module):
        self.module = module

    @staticmethod
    def encode(values, ops, operands) -> np.ndarray:
        """``(n, 22)`` float32 one-hots of value (10), op (2), operand (10)."""
        x = np.zeros((len(values), 22), np.float32)
        x[np.arange(len(values)), values] = 1
        x[np.arange(len(values)), 10 + np.asarray(ops)] = 1
        x[np.arange(len(values)), 12 + np.asarray(operands)] = 1
        return x

    def step_probs(self, values, ops, operands) -> np.ndarray:
        """``(n, 10)`` probabilities of the next value."""
        import torch

        with torch.no_grad():
            return torch.softmax(self.module(torch.as_tensor(self.encode(values, ops, operands))), -1).numpy()


def train_agents(seed: int, examples: int = 1000, steps: int = 300) -> dict[str, StepSolver]:
    """One :class:`StepSolver` per role, each trained (full-batch Adam) on ``examples`` steps drawn from
    its role's mix. Seconds on one core; nothing cached."""
    import torch

    from .._report import rng as named_rng
    from .._rl import mlp

    solvers = {}
    for role in ROLES:
        g = named_rng(seed, "radar", "agent", role)
        p_add, _ = ROLE_MIX[role]
        vals = g.integers(0, 10, examples)
        ops = (g.random(examples) >= p_add).astype(int)
        operands = np.where(ops == 0, g.integers(1, 10, examples), g.integers(2, 10, examples))
        target = np.where(ops == 0, (vals + operands) % 10, (vals * operands) % 10)
        torch.manual_seed(int(g.integers(2**31)))
        net = mlp(22, 10, 32, 1)
        opt = torch.optim.Adam(net.parameters(), lr=1e-2)
        x = torch.as_tensor(StepSolver.encode(vals, ops, operands))
        y = torch.as_tensor(target)
        for _ in range(steps):
            loss = torch.nn.functional.cross_entropy(net(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        solvers[role] = StepSolver(net.eval())
    return solvers


def slip_probability(step: int, slip: float = SLIP_PER_STEP) -> float:
    """Probability that an agent loses track at ``step`` (0-based) of a query: 0 for the first
    :data:`SLIP_FREE_STEPS` steps, then ``slip`` times the number of steps past them (``slip``, ``2 slip``,
    ...), capped at :data:`SLIP_CAP`. A stand-in for a language model's reasoning drifting on long
    chains; each slip is drawn independently per agent, so independent votes can outvote it.

    Raises:
        ValueError: a negative ``step`` or a ``slip`` outside [0, 1].
    """
    from .._report import need

    need(step >= 0, "step", step, "must be >= 0")
    need(0.0 <= slip <= 1.0, "slip", slip, "must be in [0, 1]")
    return min(slip * max(0, step - SLIP_FREE_STEPS + 1), SLIP_CAP)


def run_agents(solvers: dict[str, StepSolver], requests: list[tuple[Query, str]], rng: np.random.Generator,
               temperature: float = 1.0, slip: float = SLIP_PER_STEP) -> list[tuple[list[str], int]]:
    """Each (query, role) request answered by one sampled agent: (rationale tokens, answer).

    At each step the agent samples the running value from its step solver's softmax at ``temperature``,
    except that with probability :func:`slip_probability` (step index, ``slip``) it loses track and writes
    a uniformly random digit instead; later steps continue from what it wrote.
    """
    out: list = [None] * len(requests)
    for role in sorted({r for _, r in requests}):  # a fixed order: set order follows string hashing
        idx = [i for i, (_, r) in enumerate(requests) if r == role]
        qs = [requests[i][0] for i in idx]
        cur = np.array([q.start for q in qs])
        trace = [[] for _ in idx]
        for t in range(max(q.difficulty for q in qs)):
            live = [j for j, q in enumerate(qs) if q.difficulty > t]
            ops = [OPS.index(qs[j].ops[t][0]) for j in live]
            operands = [qs[j].ops[t][1] for j in live]
            p = solvers[role].step_probs(cur[live], ops, operands) ** (1.0 / temperature)
            p /= p.sum(1, keepdims=True)
            lost = rng.random(len(live)) < slip_probability(t, slip)
            for k, j in enumerate(live):
                cur[j] = int(rng.integers(10)) if lost[k] else int(rng.choice(10, p=p[k]))
                trace[j].append(str(cur[j]))
        for k, i in enumerate(idx):
            out[i] = (trace[k], int(cur[k]))
    return out


def graph_tokens(q: Query, adj: np.ndarray) -> int:
    """Tokens of executing the graph ``adj`` (``(n, n)``) on ``q``: they depend only on the query and the
    edges (every agent's rationale has one token per operation), so no agent is run."""
    n = len(adj)
    return run_graph(q, ["generalist"] * n, adj, [(["0"] * q.difficulty, 0)] * n)["tokens"]


def execution_order(n: int, adj: np.ndarray) -> tuple[list[int], np.ndarray]:
    """A topological order of the graph (lowest index first among ready nodes) and the adjacency with
    every edge that would close a cycle removed (edges are considered in index order)."""
    import networkx as nx

    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    keep = np.zeros_like(adj)
    for i in range(n):
        for j in range(n):
            if adj[i, j] and i != j:
                g.add_edge(i, j)
                if not nx.is_directed_acyclic_graph(g):
                    g.remove_edge(i, j)
                else:
                    keep[i, j] = 1
    return list(nx.lexicographical_topological_sort(g)), keep


def run_graph(q: Query, roles: list[str], adj: np.ndarray, outputs: list[tuple[list[str], int | None]]) -> dict:
    """Execute one communication graph given each agent's own output (see the module docstring).

    Args:
        q: the query.
        roles: the agents' roles, ``n`` of them.
        adj: ``(n, n)`` 0/1, ``adj[u, v] = 1`` sends u's message to v.
        outputs: each agent's (rationale tokens, answer) from :func:`run_agents`.

    Returns:
        ``{"answer", "correct", "tokens", "nodes", "edges"}``.
    """
    n = len(roles)
    order, adj = execution_order(n, np.asarray(adj))
    qlen = len(q.text.split()) + 2
    final, support, tokens = {}, {}, 0
    for v_ in order:
        own_toks, own = outputs[v_]
        tally = {own: 1}
        prompt = qlen
        for u in np.flatnonzero(adj[:, v_]):
            tally[final[u]] = tally.get(final[u], 0) + support[u]
            prompt += len(outputs[u][0]) + 2  # rationale + answer + vote count
        best = max(tally.values())
        final[v_] = own if tally[own] == best else next(a for a, c in tally.items() if c == best)
        support[v_] = tally[final[v_]]
        tokens += prompt + len(own_toks) + 1
    ans = final[order[-1]]
    return {"answer": ans, "correct": ans == q.answer, "tokens": tokens, "nodes": n, "edges": int(adj.sum())}
