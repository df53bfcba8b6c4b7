"""Multi^2's two agents and the flat baselines on the grid world of :mod:`.env`.

- High level (System 1 in the paper): a tiny causal transformer fine-tuned (SFT) on expert sub-goal
  stacks: ``mission : <text> done : <sub-goals so far> next :`` -> ``touch red ball`` or ``stop``,
  decoded greedily inside the sub-goal grammar.
- Low level (System 2): a policy over (egocentric symbolic observation, tokenised sub-goal) whose
  action is an atomic action *and* a "sub-goal done" flag (10 joint actions), trained in Multi^2's
  stages: format warm-up (behaviour cloning on the demonstrations), offline IQL on the same steps
  (:class:`onchip.methods._rl.IQL`), online IQL on its own rollouts. When it declares the
  sub-goal done, the high level writes the next one.
- Flat baselines: one policy over (observation, tokenised mission, completed-count history) with the
  5 atomic actions, trained by BC or BC + offline IQL.

Source: Multi^2 (arXiv 2606.03698), public code github park-sangeun/Multi-Square (IQL with
expectile 0.7, beta 5, soft target 0.01; warm-up SFT before offline RL; online phase after).
"""

from __future__ import annotations

import numpy as np

from .._rl import mlp
from .._torch import import_torch
from .env import COLOURS, KINDS, N_ACTIONS, TOUCH, TYPES, Episode, ego_observation, expert_action, subgoal_text

N_JOINT = 2 * N_ACTIONS  # (atomic action, done flag): index = action + N_ACTIONS * done
KIND_DIM = len(COLOURS) + len(TYPES)


# ------------------------------------------------------------------ text <-> features


def kind_features(words: list[str]) -> np.ndarray:
    """Tokenised "colour type" words -> one-hot colour (4) and type (3): ``(7,)`` float32."""
    v = np.zeros(KIND_DIM, np.float32)
    for w in words:
        if w in COLOURS:
            v[COLOURS.index(w)] = 1
        elif w in TYPES:
            v[len(COLOURS) + TYPES.index(w)] = 1
    return v


def mission_features(text: str, max_horizon: int) -> np.ndarray:
    """The mission's clauses in order, each tokenised to :func:`kind_features`: ``(max_horizon * 7,)``."""
    words = text.split()
    out = np.zeros((max_horizon, KIND_DIM), np.float32)
    slot = -1
    for i, w in enumerate(words):
        if w == "touch":
            slot += 1
        elif slot < max_horizon and (w in COLOURS or w in TYPES):
            out[slot] += kind_features([w])
    return out.ravel()


def parse_subgoal(text: str) -> int | None:
    """``"touch red ball"`` -> kind id; ``"stop"`` or anything else -> None."""
    words = text.split()
    if len(words) == 3 and words[0] == "touch" and f"{words[1]} {words[2]}" in KINDS:
        return KINDS.index(f"{words[1]} {words[2]}")
    return None


def low_state(ep: Episode, goal: int) -> np.ndarray:
    """Low-level input: egocentric observation + tokenised sub-goal (float32)."""
    return np.concatenate([ego_observation(ep), kind_features(KINDS[goal].split())]).astype(np.float32)


def flat_state(ep: Episode, max_horizon: int) -> np.ndarray:
    """Flat input: egocentric observation + tokenised mission + history (sub-instructions completed, as
    a thermometer code of ``max_horizon`` bits) (float32)."""
    hist = (np.arange(max_horizon) < ep.progress).astype(np.float32)
    return np.concatenate([ego_observation(ep), mission_features(ep.text, max_horizon), hist]).astype(np.float32)


# ------------------------------------------------------------------ demonstrations


def collect_demos(episodes: list[Episode], rng: np.random.Generator, *, noisy: np.ndarray, max_horizon: int,
                  eps: float = 0.3, p_wrong: float = 0.15, p_early: float = 0.6) -> dict:
    """Roll out the expert (``noisy[i] = False``) or the noisy demonstrator on each episode, recording
    the hierarchical data (high-level prompts, low-level transitions) and the flat transitions.

    The expert walks a shortest path to each sub-goal's object, touches it and declares the sub-goal
    done. The noisy demonstrator, per sub-goal, goes to a wrong object with probability ``p_wrong``
    (touching a later mission object there is objective drift); per step it takes a uniformly random
    action with probability ``eps``; and on the move that should bring it onto its target it declares
    the sub-goal done *with that move*, before touching, with probability ``p_early`` (a systematic
    premature "done": with ``p_early`` > 0.5 it is the most frequent action in that state, so
    behaviour cloning copies it; the sub-goal is then never completed and touching the next one is
    drift). The high-level examples are the mission's own sub-goal stack (the text annotation,
    independent of how well the episode was executed), ending in ``stop``.

    Args:
        episodes: fresh episodes (stepped in place).
        rng: the demonstrators' randomness.
        noisy: ``(len(episodes),)`` bool, which episodes the noisy demonstrator runs.
        max_horizon: the flat state's mission slots.
        eps, p_wrong, p_early: probabilities in [0, 1].

    Returns:
        ``{"high": [(mission, done_subgoals, next)], "low": arrays, "flat": arrays}``; each transition
        array dict has ``s, a, r, s2, done, expert`` (float32 states; one low and one flat transition
        per environment step).

    Raises:
        ValueError: a probability outside [0, 1] or ``noisy`` of the wrong length.
    """
    for name, v in (("eps", eps), ("p_wrong", p_wrong), ("p_early", p_early)):
        if not 0.0 <= v <= 1.0:
            raise ValueError(f"{name}: must be in [0, 1], got {v!r}")
    if len(noisy) != len(episodes):
        raise ValueError(f"noisy: one flag per episode ({len(episodes)}), got {len(noisy)}")
    high, low, flat = [], {k: [] for k in ("s", "a", "r", "s2", "done", "expert")}, \
        {k: [] for k in ("s", "a", "r", "s2", "done", "expert")}
    for ep, is_noisy in zip(episodes, noisy):
        stack = [subgoal_text(g) for g in ep.mission]
        for i in range(len(stack) + 1):
            high.append((ep.text, stack[:i], stack[i] if i < len(stack) else "stop"))
        for i, goal in enumerate(list(ep.mission)):
            if ep.done:
                break
            target = goal
            if is_noisy and rng.random() < p_wrong:
                others = [k for k in ep.objects if k != goal]
                target = int(others[rng.integers(len(others))])
            while not ep.done:
                s_low, s_flat = low_state(ep, goal), flat_state(ep, max_horizon)
                a = expert_action(ep, target, rng)
                declare = a == TOUCH
                if is_noisy and rng.random() < eps:
                    a, declare = int(rng.integers(N_ACTIONS)), False
                elif is_noisy and a != TOUCH and _lands_on(ep, a, target) and rng.random() < p_early:
                    declare = True  # premature: "done" with the last move, before touching
                r_env = ep.step(a)
                end_goal = declare or ep.done
                reached = ep.progress > i
                _push(low, s_low, a + N_ACTIONS * int(declare), float(declare and reached),
                      low_state(ep, goal), float(end_goal and (declare or ep.success or ep.drift)), not is_noisy)
                _push(flat, s_flat, a, r_env, flat_state(ep, max_horizon),
                      float(ep.success or ep.drift), not is_noisy)
                if end_goal:
                    break
    as_arrays = lambda d: {"s": np.stack(d["s"]), "a": np.asarray(d["a"], np.int64),  # noqa: E731
                           "r": np.asarray(d["r"], np.float32), "s2": np.stack(d["s2"]),
                           "done": np.asarray(d["done"], np.float32), "expert": np.asarray(d["expert"], bool)}
    return {"high": high, "low": as_arrays(low), "flat": as_arrays(flat)}


def _lands_on(ep: Episode, action: int, target: int) -> bool:
    """Whether the move ``action`` (without a slip) brings the agent onto ``target``'s cell."""
    from .env import MOVES

    dr, dc = MOVES[action]
    return (ep.agent[0] + dr, ep.agent[1] + dc) == ep.objects[target]


def _push(d, s, a, r, s2, done, expert):
    d["s"].append(s)
    d["a"].append(a)
    d["r"].append(r)
    d["s2"].append(s2)
    d["done"].append(done)
    d["expert"].append(expert)


# ------------------------------------------------------------------ high level: SFT of a tiny LM


def high_level_prompt(mission: str, done: list[str]) -> str:
    """The high-level agent's prompt: ``mission : ... done : a ; b next :``."""
    return f"mission : {mission} done : {' ; '.join(done) if done else 'none'} next :"


def high_level_vocab():
    """The closed word list of missions, prompts and sub-goals."""
    from .._tiny import Vocab
    from .env import CONNECTIVES

    words = ["mission", ":", "done", "none", ";", "next", "stop", "touch", "the", *COLOURS, *TYPES]
    words += [w for c in CONNECTIVES for w in c.split()]
    return Vocab(words)


def train_high_level(examples, *, steps: int, seed: int, progress: bool = False, cache_key=None):
    """Supervised fine-tuning of the high-level agent on ``(mission, done, next)`` examples.

    Args:
        cache_key: when given (the caller includes the torch version and thread count), the trained
            weights are kept in the onchip cache under this key (plus
            ``steps``, ``seed`` and a digest of the examples) and reused.

    Returns:
        ``(model, vocab)``; the model is a :func:`onchip.methods._tiny.TinyTransformer` decoder.
    """
    import hashlib

    torch = import_torch()
    from .._tiny import TinyConfig, TinyTransformer, cached_model, pad_batch, train

    vocab = high_level_vocab()
    seqs, masks = [], []
    for mission, done, nxt in examples:
        p = vocab.encode(high_level_prompt(mission, done), bos=True)
        t = vocab.encode(nxt, eos=True)
        seqs.append(p + t)
        masks.append([0] * len(p) + [1] * len(t))
    ids, mask = pad_batch(seqs, 64), pad_batch(masks, 64)
    config = TinyConfig(vocab=len(vocab), d_model=48, n_layers=2, n_heads=4, max_len=64)

    def batches(rng):
        idx = rng.integers(0, len(ids), 32)
        return ids[idx], mask[idx]

    def build(model):
        train(model, batches, steps=steps, lr=3e-3, seed=seed, progress=progress, desc="high-level SFT")

    if cache_key is None:
        torch.manual_seed(seed)
        model = TinyTransformer(config)
        build(model)
        return model, vocab
    data = hashlib.sha256(ids.tobytes() + mask.tobytes()).hexdigest()[:16]
    torch.manual_seed(seed)  # the caller's generator as the uncached path leaves it (train reseeds it)
    return cached_model("multi2_high", config, [seed, steps, data, *cache_key], build, init_seed=seed), vocab


def decode_subgoals(model, vocab, prompts: list[str]) -> list[int | None]:
    """Greedy decoding of the next sub-goal inside the grammar ``touch <colour> <type> | stop``;
    returns kind ids (None = stop)."""
    from .._tiny import greedy_decode

    touch, stop = vocab.stoi["touch"], vocab.stoi["stop"]
    colours = [vocab.stoi[c] for c in COLOURS]
    types = [vocab.stoi[t] for t in TYPES]

    def allowed(_row, gen):
        if not gen:
            return [touch, stop]
        if gen[0] == stop or len(gen) == 3:
            return [vocab.eos]
        return colours if len(gen) == 1 else types

    out = greedy_decode(model, [vocab.encode(p, bos=True) for p in prompts], max_new=4, allowed=allowed)
    return [parse_subgoal(vocab.decode(g)) for g in out]


# ------------------------------------------------------------------ low level and flat policies


def _float(x):
    torch = import_torch()
    return torch.as_tensor(x, dtype=torch.float32)


def object_net(cond_dim: int, n_out: int, hidden: int = 128, key_dim: int = 32):
    """The small policy / critic network of every arm: ``(n, 48 + cond_dim) -> (n, n_out)``.

    The conditioning text features (a tokenised sub-goal, or a tokenised mission plus history) are
    mapped to a query; the query attends over the objects present (one learned key per kind); the
    attended object's features (offset, "on it") and the conditioning go through an MLP. Same
    architecture for the low level and the flat baselines, so they differ only in what conditions them.
    """
    torch = import_torch()
    nn = torch.nn
    n_kinds = len(KINDS)

    class ObjectNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.keys = nn.Parameter(torch.randn(n_kinds, key_dim) * 0.3)
            self.query = mlp(cond_dim, key_dim, hidden, 1)
            self.head = mlp(4 + cond_dim + 1, n_out, hidden, 2)

        def forward(self, x):
            objs = x[:, :4 * n_kinds].view(-1, n_kinds, 4)
            cond = x[:, 4 * n_kinds:]
            logits = (self.query(cond) @ self.keys.T).masked_fill(objs[..., 0] < 0.5, -1e4)
            att = torch.softmax(logits, -1)
            picked = (att[..., None] * objs).sum(1)
            return self.head(torch.cat([picked, cond, att.max(-1, keepdim=True).values], -1))

    return ObjectNet()


def behaviour_cloning(actor, data: dict, *, steps: int, seed: int, batch: int = 128, lr: float = 1e-3,
                      progress: bool = False, desc: str = "BC") -> None:
    """Cross-entropy on the data's ``(s, a)`` pairs (Multi^2's format warm-up when run on expert steps)."""
    torch = import_torch()
    from onchip.progress import progress_bar

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    opt = torch.optim.Adam(actor.parameters(), lr=lr)
    for _ in progress_bar(range(steps), desc=desc, disable=not progress, leave=False):
        idx = rng.integers(0, len(data["a"]), batch)
        loss = torch.nn.functional.cross_entropy(actor(_float(data["s"][idx])), torch.as_tensor(data["a"][idx]))
        opt.zero_grad()
        loss.backward()
        opt.step()


def iql_train(iql, data: dict, *, steps: int, seed: int, batch: int = 128, progress: bool = False,
              desc: str = "IQL", train_actor: bool = True) -> None:
    """``steps`` IQL updates on uniform mini-batches of the transition arrays (``train_actor=False``:
    the value and Q networks only - the critic warm-up that lets the reward propagate back along the
    paths before the advantage weights steer a warm-started actor)."""
    torch = import_torch()
    from onchip.progress import progress_bar

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    for _ in progress_bar(range(steps), desc=desc, disable=not progress, leave=False):
        idx = rng.integers(0, len(data["a"]), batch)
        iql.update(_float(data["s"][idx]), torch.as_tensor(data["a"][idx]), _float(data["r"][idx]),
                   _float(data["s2"][idx]), _float(data["done"][idx]), train_actor=train_actor)


def advantages(iql, data: dict) -> np.ndarray:
    """IQL's advantage ``Q_target(s, a) - V(s)`` of every transition in ``data``: ``(n,)`` float."""
    torch = import_torch()
    with torch.no_grad():
        s = _float(data["s"])
        q = iql.q_target(s).gather(1, torch.as_tensor(data["a"])[:, None]).squeeze(1)
        return (q - iql.v(s).squeeze(-1)).numpy()


def greedy_actions(actor, states: np.ndarray) -> np.ndarray:
    """The actor's argmax action for each state: ``(n,)`` int."""
    return _act(actor, list(states), None)


def _act(actor, states: list[np.ndarray], rng: np.random.Generator | None) -> np.ndarray:
    torch = import_torch()
    with torch.no_grad():
        logits = actor(_float(np.stack(states)))
    if rng is None:
        return logits.argmax(-1).numpy()
    p = torch.softmax(logits, -1).numpy().astype(np.float64)
    return np.array([rng.choice(p.shape[1], p=row / row.sum()) for row in p])


def run_hierarchical(high, vocab, low_actor, episodes: list[Episode], *, rng: np.random.Generator | None = None,
                     record: dict | None = None, true_subgoals: bool = False) -> None:
    """Run Multi^2 on the episodes (in lockstep): the high level writes a sub-goal whenever the low
    level has declared the previous one done; ``stop`` or an unparsable sub-goal ends the episode.

    Args:
        rng: None = greedy low-level actions; a generator = sampled (online data collection).
        record: transition lists (``s, a, r, s2, done``) to append the low-level steps to.
        true_subgoals: replace the high level by the mission's own next sub-instruction (after as many
            as the low level has declared done): isolates the low level's share of the failures.
    """
    goals: list[int | None] = [None] * len(episodes)
    history: list[list[str]] = [[] for _ in episodes]
    while True:
        need = [i for i, ep in enumerate(episodes) if not ep.done and goals[i] is None]
        if need:
            if true_subgoals:
                new = [episodes[i].mission[len(history[i])] if len(history[i]) < len(episodes[i].mission) else None
                       for i in need]
            else:
                new = decode_subgoals(high, vocab, [high_level_prompt(episodes[i].text, history[i]) for i in need])
            for i, g in zip(need, new):
                if g is None or g not in episodes[i].objects:
                    episodes[i].done = True  # stop (or a sub-goal naming nothing here): the agent ends
                else:
                    goals[i] = g
        live = [i for i, ep in enumerate(episodes) if not ep.done]
        if not live:
            return
        states = [low_state(episodes[i], goals[i]) for i in live]
        joint = _act(low_actor, states, rng)
        for i, s, j in zip(live, states, joint):
            ep = episodes[i]
            action, declare = int(j) % N_ACTIONS, int(j) >= N_ACTIONS
            goal = goals[i]
            ep.step(action)
            if record is not None:
                reached = goal in ep.mission and ep.mission.index(goal) < ep.progress
                _push(record, s, int(j), float(declare and reached), low_state(ep, goal),
                      float(declare or ep.success or ep.drift), False)
            if declare:
                history[i].append(subgoal_text(goal))
                goals[i] = None


def run_flat(actor, episodes: list[Episode], max_horizon: int, *, rng: np.random.Generator | None = None) -> None:
    """Run a flat policy on the episodes in lockstep (greedy unless ``rng``)."""
    while True:
        live = [i for i, ep in enumerate(episodes) if not ep.done]
        if not live:
            return
        acts = _act(actor, [flat_state(episodes[i], max_horizon) for i in live], rng)
        for i, a in zip(live, acts):
            episodes[i].step(int(a))
