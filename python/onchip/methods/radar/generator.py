"""RADAR's graph generator: effective size, denoising and ordering networks, and the one-shot baseline.

Follows the public code (cszhangzhen/RADAR, ``model/denoising.py``, ``model/ordering.py``, ``model/gd.py``):
an autoregressive discrete graph diffusion in the manner of GraphARM (Kong et al., ICML 2023). The
ordering network picks which node to absorb next (a node-absorbing order, sampled; trained by REINFORCE
with reward = minus the denoising loss); the denoising network re-generates the graph in the reverse
order, predicting each new node's type (agent role) and its edge type to every existing node (none /
in / out) from a message-passing encoding of the partial graph, a learned-weight effective-size feature
per node and the query embedding. Dense tensors for graphs of <= 6 nodes, no torch-geometric.

Deviations (guesses, stated in the card): a STOP node type lets the graph size depend on the query (the
repo generates a fixed number of agents); the RL advantage is signed (reward minus the mean reward of
the fixed topologies on that query) rather than the repo's [0, 1] rescaling.
"""

from __future__ import annotations

import numpy as np

from . import ROLES

R = len(ROLES)
NONE, IN, OUT = 0, 1, 2  # edge type between an existing node and the new one: in = existing -> new


def effective_size(roles, adj, alpha: float = 0.7) -> np.ndarray:
    """RADAR's structural-hole feature per node, ``(n,)`` float.

    For node i with in-neighbours N_in (edges j -> i) and out-neighbours N_out: ``e_in = |N_in| - t_in /
    |N_in|`` where ``t_in`` counts ordered pairs (a, b) in N_in with an edge a -> b and the same role (0 if
    N_in is empty), likewise ``e_out``; the feature is ``((1 - alpha) e_in + alpha e_out) / (n - 1)``
    (0 for n = 1). With one role and a symmetric adjacency, ``e_in = e_out`` is Burt's effective size
    ``|N| - 2 t / |N|`` (t undirected ties among the neighbours), which is networkx's ``effective_size``.

    Args:
        roles: ``(n,)`` role ids.
        adj: ``(n, n)`` 0/1, ``adj[j, i] = 1`` for an edge j -> i.
        alpha: weight of the out-neighbourhood (the repo's 0.7).
    """
    adj = np.asarray(adj) > 0
    roles = np.asarray(roles)
    n = len(roles)
    out = np.zeros(n)
    if n <= 1:
        return out
    same = roles[:, None] == roles[None, :]
    np.fill_diagonal(same, False)
    for i in range(n):
        parts = []
        for nb in (np.flatnonzero(adj[:, i]), np.flatnonzero(adj[i, :])):
            k = len(nb)
            ties = int((adj[np.ix_(nb, nb)] & same[np.ix_(nb, nb)]).sum()) if k else 0
            parts.append(k - ties / k if k else 0.0)
        out[i] = ((1 - alpha) * parts[0] + alpha * parts[1]) / (n - 1)
    return out


def _nets(q_dim: int, max_nodes: int, hidden: int = 64):
    import torch
    from torch import nn

    from .._rl import mlp

    class Encoder(nn.Module):
        """Message passing over a partial graph: role one-hot + effective size -> node states."""

        def __init__(self):
            super().__init__()
            self.inp = nn.Linear(R, hidden)
            self.layers = nn.ModuleList(nn.Linear(3 * hidden, hidden) for _ in range(2))
            self.eff_weight = nn.Parameter(torch.tensor(1.0))

        def forward(self, roles, adj):
            x = torch.relu(self.inp(torch.nn.functional.one_hot(roles, R).float()))
            a = adj.float()
            for layer in self.layers:
                m_in = a.T @ x / a.sum(0).clamp(min=1)[:, None]
                m_out = a @ x / a.sum(1).clamp(min=1)[:, None]
                x = torch.relu(layer(torch.cat([x, m_in, m_out], -1)))
            eff = torch.as_tensor(effective_size(roles.numpy(), adj.numpy()), dtype=torch.float32)
            return x + self.eff_weight * eff[:, None]

    class Denoiser(nn.Module):
        """p(next role or STOP | partial graph, query) and p(edge type to each existing node | ...)."""

        def __init__(self):
            super().__init__()
            self.enc = Encoder()
            self.q = nn.Linear(q_dim, hidden)
            self.node = mlp(2 * hidden + max_nodes, R + 1, hidden, 1)
            self.role_emb = nn.Embedding(R, hidden)
            self.edge = mlp(3 * hidden, 3, hidden, 1)

        def node_logits(self, roles, adj, q):
            k = len(roles)
            qv = torch.relu(self.q(q))
            h = self.enc(roles, adj) if k else torch.zeros(0, hidden)
            summary = h.mean(0) if k else torch.zeros(hidden)
            step = torch.nn.functional.one_hot(torch.tensor(min(k, max_nodes - 1)), max_nodes).float()
            logits = self.node(torch.cat([qv, summary, step]))
            if k == 0:
                logits = logits.clone()
                logits[R] = float("-inf")  # at least one agent
            return logits, h, qv

        def edge_logits(self, h, qv, role):
            k = h.shape[0]
            r = self.role_emb(torch.tensor(role)).expand(k, -1)
            return self.edge(torch.cat([qv.expand(k, -1), h, r], -1))

    class Ordering(nn.Module):
        """Scores which remaining node is absorbed next (a distribution over the remaining nodes)."""

        def __init__(self):
            super().__init__()
            self.enc = Encoder()
            self.score = nn.Linear(hidden, 1)

        def forward(self, roles, adj):
            return self.score(self.enc(roles, adj)).squeeze(-1)

    class OneShot(nn.Module):
        """G-Designer-like baseline: every slot's role (or absent) and every edge i -> j (i < j) at once."""

        def __init__(self):
            super().__init__()
            self.body = mlp(q_dim, hidden, layers=0, out_activation="relu")
            self.roles = nn.Linear(hidden, max_nodes * (R + 1))
            self.edges = nn.Linear(hidden, max_nodes * max_nodes)

        def forward(self, q):
            z = self.body(q)
            return self.roles(z).view(max_nodes, R + 1), self.edges(z).view(max_nodes, max_nodes)

    return Denoiser, Ordering, OneShot


class RadarGenerator:
    """The denoising and ordering networks with their training and sampling.

    Args:
        q_dim: query feature size; max_nodes: largest graph (agents); seed: torch initialisation.
    """

    def __init__(self, q_dim: int, max_nodes: int, seed: int = 0):
        import torch

        torch.manual_seed(seed)
        Denoiser, Ordering, _ = _nets(q_dim, max_nodes)
        self.max_nodes = max_nodes
        self.den, self.ord = Denoiser(), Ordering()
        self.opt_den = torch.optim.Adam(self.den.parameters(), lr=3e-3)
        self.opt_ord = torch.optim.Adam(self.ord.parameters(), lr=3e-3)

    # -- the diffusion trajectory of a graph
    def sample_order(self, roles, adj, uniform: bool = False, rng=None):
        """A node-absorbing order from the ordering network: (order, its log-probability tensor)."""
        import torch

        left = list(range(len(roles)))
        order, logq = [], torch.tensor(0.0)
        while left:
            r = torch.as_tensor(np.asarray(roles)[left])
            a = torch.as_tensor(np.asarray(adj)[np.ix_(left, left)])
            if uniform:
                pick = int((rng or np.random.default_rng()).integers(len(left)))
            else:
                logp = torch.log_softmax(self.ord(r, a), -1)
                pick = int(torch.distributions.Categorical(logits=logp).sample())
                logq = logq + logp[pick]
            order.append(left.pop(pick))
        return order, logq

    def log_prob(self, roles, adj, q, gen_order):
        """log p(graph) when generated node by node in ``gen_order`` (original node ids), STOP included."""
        import torch

        roles, adj = np.asarray(roles), np.asarray(adj)
        total = torch.tensor(0.0)
        for t in range(len(gen_order) + (1 if len(gen_order) < self.max_nodes else 0)):
            prev = gen_order[:t]
            r = torch.as_tensor(roles[prev]) if t else torch.zeros(0, dtype=torch.long)
            a = torch.as_tensor(adj[np.ix_(prev, prev)]) if t else torch.zeros(0, 0)
            logits, h, qv = self.den.node_logits(r, a, q)
            lp = torch.log_softmax(logits, -1)
            if t == len(gen_order):
                total = total + lp[R]
                break
            new = gen_order[t]
            total = total + lp[roles[new]]
            if t:
                et = torch.as_tensor([IN if adj[e, new] else OUT if adj[new, e] else NONE for e in prev])
                total = total + torch.log_softmax(self.den.edge_logits(h, qv, int(roles[new])), -1)[
                    torch.arange(t), et].sum()
        return total

    def fit(self, graphs, epochs: int, rng: np.random.Generator, orders_per_graph: int = 2,
            uniform_order: bool = False, progress=None) -> list[float]:
        """Train on successful graphs ``[(roles, adj, q_features)]``: the denoiser by NLL of the reverse
        absorbing orders, the ordering network by REINFORCE with reward = -NLL (mean-reward baseline)."""
        import torch

        losses = []
        for _ in range(epochs):
            for k in rng.permutation(len(graphs)):
                roles, adj, qf = graphs[k]
                q = torch.as_tensor(qf)
                nll, logqs = [], []
                for _ in range(orders_per_graph):
                    order, logq = self.sample_order(roles, adj, uniform=uniform_order, rng=rng)
                    nll.append(-self.log_prob(roles, adj, q, order[::-1]))
                    logqs.append(logq)
                nll_t = torch.stack(nll)
                self.opt_den.zero_grad()
                nll_t.mean().backward()
                self.opt_den.step()
                if not uniform_order:
                    reward = -nll_t.detach()
                    loss_o = -((reward - reward.mean()) * torch.stack(logqs)).sum()
                    self.opt_ord.zero_grad()
                    loss_o.backward()
                    self.opt_ord.step()
                losses.append(float(nll_t.detach().mean()))
                if progress:
                    progress()
        return losses

    def generate(self, qf, rng: np.random.Generator, with_log_prob: bool = False):
        """One graph for a query (sampled node by node): (roles, adj[, log-probability tensor])."""
        import torch

        q = torch.as_tensor(qf)
        roles: list[int] = []
        adj = np.zeros((self.max_nodes, self.max_nodes), np.int64)
        total = torch.tensor(0.0)
        grad = torch.enable_grad() if with_log_prob else torch.no_grad()
        with grad:
            for t in range(self.max_nodes):
                r = torch.as_tensor(roles, dtype=torch.long)
                a = torch.as_tensor(adj[:t, :t])
                logits, h, qv = self.den.node_logits(r, a, q)
                probs = torch.softmax(logits, -1)
                p = probs.detach().numpy().astype(np.float64)
                role = int(rng.choice(R + 1, p=p / p.sum()))
                total = total + torch.log_softmax(logits, -1)[role]
                if role == R:
                    break
                if t:
                    el = self.den.edge_logits(h, qv, role)
                    p = torch.softmax(el, -1).detach().numpy().astype(np.float64)
                    et = [int(rng.choice(3, p=row / row.sum())) for row in p]
                    total = total + torch.log_softmax(el, -1)[torch.arange(t), torch.as_tensor(et)].sum()
                    for e, typ in enumerate(et):
                        if typ == IN:
                            adj[e, t] = 1
                        elif typ == OUT:
                            adj[t, e] = 1
                roles.append(role)
        n = len(roles)
        out = (roles, adj[:n, :n])
        return (*out, total) if with_log_prob else out

    def reinforce(self, log_prob, advantage: float) -> None:
        """One REINFORCE step on the denoiser: minimise ``-advantage * log p(graph)``."""
        self.opt_den.zero_grad()
        (-advantage * log_prob).backward()
        self.opt_den.step()


class OneShotGenerator:
    """G-Designer-like baseline: all roles and edges of a graph predicted at once from the query,
    trained by maximum likelihood on the same successful graphs (in their topological order)."""

    def __init__(self, q_dim: int, max_nodes: int, seed: int = 0):
        import torch

        torch.manual_seed(seed)
        _, _, OneShot = _nets(q_dim, max_nodes)
        self.max_nodes = max_nodes
        self.net = OneShot()
        self.opt = torch.optim.Adam(self.net.parameters(), lr=3e-3)

    def fit(self, graphs, epochs: int, rng: np.random.Generator) -> None:
        import torch

        from .agents import execution_order

        n_max = self.max_nodes
        for _ in range(epochs):
            for k in rng.permutation(len(graphs)):
                roles, adj, qf = graphs[k]
                order, adj = execution_order(len(roles), np.asarray(adj))
                target = torch.full((n_max,), R, dtype=torch.long)
                target[:len(order)] = torch.as_tensor(np.asarray(roles)[order])
                e = torch.zeros(n_max, n_max)
                e[:len(order), :len(order)] = torch.as_tensor(np.asarray(adj)[np.ix_(order, order)]).float()
                rl, el = self.net(torch.as_tensor(qf))
                upper = torch.triu(torch.ones(n_max, n_max), 1).bool()
                live = torch.zeros(n_max, n_max, dtype=torch.bool)
                live[:len(order), :len(order)] = True
                mask = upper & live
                loss = torch.nn.functional.cross_entropy(rl, target) + \
                    torch.nn.functional.binary_cross_entropy_with_logits(el[mask], e[mask])
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()

    def generate(self, qf, rng: np.random.Generator):
        import torch

        with torch.no_grad():
            rl, el = self.net(torch.as_tensor(qf))
            pr = torch.softmax(rl, -1).numpy().astype(np.float64)
            pe = torch.sigmoid(el).numpy()
        roles = []
        for s in range(self.max_nodes):
            p = pr[s].copy()
            if s == 0:
                p[R] = 0
            r = int(rng.choice(R + 1, p=p / p.sum()))
            if r == R:
                break
            roles.append(r)
        n = len(roles)
        adj = (rng.random((n, n)) < pe[:n, :n]).astype(np.int64) * np.triu(np.ones((n, n), np.int64), 1)
        return roles, adj
