"""The search-then-answer policy and its GRPO training.

Each turn (at most ``max_turns``) the policy decides SEARCH or ANSWER. A search writes a query
``"<entity> <relation>"``: it points at one name in its context (question + retrieved documents) and
one relation word; the BM25 tool returns the top document, appended to the context. An answer
points at one object of the scene (the class-agnostic proposals, standing in for the MLLM's
grounding), whose box and centre point go to the mask step (:func:`.world.mask_from_prompt`).
Every choice is scored from features that name no entity (where a name occurs, whether it was
searched, which colour/shape words the documents hold), so the policy can work on names it never
saw. Trained by GRPO (:mod:`onchip.methods._rl`): a group of rollouts per question, rewards
normalised within the group, one policy-gradient step per batch (on-policy, so the clipped ratio is 1).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .._rl import mlp
from .._torch import import_torch
from .reward import Answer
from .world import COLOURS, RELATIONS, SHAPES, Question, Retriever, Scene, mask_from_prompt, tokenize

N_CTX = 9


@dataclass
class Trajectory:
    """One rollout: the queries written, the documents read, the answer (or None) and the summed
    log-probability of its choices (a torch scalar when sampled with gradients)."""

    queries: list = field(default_factory=list)
    docs: list = field(default_factory=list)
    answer: Answer | None = None
    picked: int | None = None
    logp: object = 0.0


def _names(text: str) -> list[str]:
    return [w.strip(".,") for w in text.split() if w[:1].isupper() and w.strip(".,") not in ("The", "Members")]


def context_features(q: Question, traj: Trajectory, turn: int, max_turns: int) -> np.ndarray:
    """``(9,)``: turn one-hot (3, clipped), searches so far, two-hop marker ("by" in the question),
    colour / shape words in the last document, in any document."""
    last = tokenize(traj.docs[-1]) if traj.docs else []
    every = [w for d in traj.docs for w in tokenize(d)]
    t = np.zeros(3, np.float32)
    t[min(turn, 2)] = 1
    return np.concatenate([t, [len(traj.queries) / max_turns, float("by" in q.text.split()),
                                any(w in COLOURS for w in last), any(w in SHAPES for w in last),
                                any(w in COLOURS for w in every), any(w in SHAPES for w in every)]]).astype(np.float32)


def entity_candidates(q: Question, traj: Trajectory) -> tuple[list[str], np.ndarray]:
    """Names in the context and their features ``(n, 6)``: in the question, after "by" in the question,
    in the last document, in any document, already searched, new in the last document."""
    qwords = q.text.split()
    names = list(dict.fromkeys(_names(q.text) + [n for d in traj.docs for n in _names(d)]))
    searched = {qq.split()[0] for qq in traj.queries}
    last = set(_names(traj.docs[-1])) if traj.docs else set()
    before = {n for d in traj.docs[:-1] for n in _names(d)} | set(_names(q.text))
    feats = [[n in qwords, n in qwords and qwords.index(n) > 0 and qwords[qwords.index(n) - 1] == "by",
              n in last, any(n in _names(d) for d in traj.docs), n in searched, n in last and n not in before]
             for n in names]
    return names, np.asarray(feats, np.float32).reshape(len(names), 6)


def relation_features(q: Question, traj: Trajectory) -> np.ndarray:
    """``(4, 8)`` per relation word: one-hot (4), in the question, followed by "by" in the question
    ("founded by"), already used in a query, in the last document."""
    qwords = q.text.split()
    used = {qq.split()[-1] for qq in traj.queries}
    last = tokenize(traj.docs[-1]) if traj.docs else []
    verb = {"founded": "founded", "leads": "led"}
    out = np.zeros((len(RELATIONS), 8), np.float32)
    for i, rel in enumerate(RELATIONS):
        word = verb.get(rel, rel)
        out[i, i] = 1
        out[i, 4] = word in qwords
        out[i, 5] = word in qwords and qwords.index(word) + 1 < len(qwords) and qwords[qwords.index(word) + 1] == "by"
        out[i, 6] = rel in used
        out[i, 7] = rel in last or word in last
    return out


def object_features(scene: Scene, traj: Trajectory) -> np.ndarray:
    """``(n_objects, 4)``: the object's colour / shape word in the last document, in any document."""
    last = tokenize(traj.docs[-1]) if traj.docs else []
    every = [w for d in traj.docs for w in tokenize(d)]
    return np.asarray([[c in last, s in last, c in every, s in every] for c, s in scene.objects], np.float32)


def make_policy(hidden: int = 32):
    """The policy network: heads for the SEARCH/ANSWER decision, the entity, the relation and the
    object, each an MLP over (candidate features, context features)."""
    torch = import_torch()
    nn = torch.nn

    def head(n_in, n_out=1):
        return mlp(n_in, n_out, hidden, 1, activation="tanh")

    class Policy(nn.Module):
        def __init__(self):
            super().__init__()
            self.decide = head(N_CTX, 2)
            self.entity = head(6 + N_CTX)
            self.relation = head(8 + N_CTX)
            self.obj = head(4 + N_CTX)

        def score(self, name, cand, ctx):
            ctx = torch.as_tensor(ctx)[None].expand(len(cand), -1)
            return getattr(self, name)(torch.cat([torch.as_tensor(cand), ctx], -1)).squeeze(-1)

    return Policy()


def rollout(policy, q: Question, scene: Scene, retriever: Retriever, *, max_turns: int = 3,
            rng: np.random.Generator | None = None, allow_search: bool = True, grad: bool = True) -> Trajectory:
    """Run the policy on one question: sample (``rng``) or take the argmax of every choice.

    Returns:
        The trajectory; ``logp`` sums the log-probabilities of the choices made (with gradients when
        ``grad``).
    """
    torch = import_torch()
    traj = Trajectory()
    logp = torch.zeros(())

    def choose(logits):
        nonlocal logp
        lp = torch.log_softmax(logits, -1)
        if rng is None:
            i = int(lp.argmax())
        else:
            p = lp.detach().exp().numpy().astype(np.float64)
            i = int(rng.choice(len(p), p=p / p.sum()))
        logp = logp + lp[i]
        return i

    with torch.set_grad_enabled(grad):
        for turn in range(max_turns):
            ctx = context_features(q, traj, turn, max_turns)
            search = allow_search and turn < max_turns - 1 and choose(policy.decide(torch.as_tensor(ctx))) == 0
            if not search:
                k = choose(policy.score("obj", object_features(scene, traj), ctx))
                traj.picked = k
                traj.answer = Answer(scene.box(k), scene.point(k))
                break
            names, ef = entity_candidates(q, traj)
            name = names[choose(policy.score("entity", ef, ctx))]
            rel = RELATIONS[choose(policy.score("relation", relation_features(q, traj), ctx))]
            query = f"{name} {rel}"
            traj.queries.append(query)
            traj.docs.append(retriever.search(query))
    traj.logp = logp
    return traj


def predicted_mask(scene: Scene, traj: Trajectory) -> np.ndarray:
    """The mask of the trajectory's answer (empty without one)."""
    if traj.answer is None:
        return np.zeros(scene.colour.shape, bool)
    return mask_from_prompt(scene.colour, traj.answer.point, traj.answer.box)
