"""Reference model, pair tensors, the one-step look-ahead meta-gradient of the calibration, and the
DPO training of every arm.

Arms (same reference model, same initial policy = the reference, same DPO steps and batches of
the same noisy pairs):

* ``dpo``: DPO on the noisy labels; ``cdpo``: label smoothing with the true flip rate; ``rdpo``:
  the unbiased robust loss of Chowdhury et al. 2024 with the true flip rate;
* ``tapc``: soft labels ``c = sigmoid(a(t) d + b(t))``, ``(a, b)`` linear in a task encoding of the
  prompt (the reference model's mean hidden state over the prompt tokens), meta-learned on the clean
  reference set; ``uniform``: the same with one slope and bias for all prompts; ``oracle``: the same
  with one-hot true task labels as the encoding;
* ``clean``: DPO on the true labels (the ceiling);
* ``dpo-long``, ``rdpo-long``: DPO and rDPO run for as many more steps as make their policy forwards
  equal a calibrated arm's (:func:`compute_ratio`; the caller passes those settings and batches).

Every arm trains on the same pool: the noisy pairs plus the clean reference pairs, which every arm
knows to be right (plain DPO loss on them: confidence 1, flip rate 0); the calibrated arms also draw
their meta-batches from the reference pairs. The calibrations see normalised encodings
(:func:`normalise`): ``d`` in units of its standard deviation over the training pairs and the task
encoder's output whitened onto its first two principal components, so one Adam learning rate means
the same step for every arm's parameters.

The meta-step follows "learning to reweight" (Ren et al. 2018) as a one-step look-ahead: with
``theta' = theta - alpha grad_theta L_soft(theta; c)`` the hypergradient is
``dL_clean(theta')/dc_i = alpha beta / n * grad L_clean(theta') . grad_theta h_i(theta)``
(:func:`lookahead_hypergradient`), the directional derivative taken by central differences.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._report import rng
from .._tiny import TinyConfig, Vocab, pad_batch
from .._torch import import_torch
from .losses import calibrated_confidence, cdpo_loss, dpo_loss, margin, rdpo_loss, soft_dpo_loss
from .world import Pairs

CALIBRATED = ("uniform", "tapc", "oracle")


def answer_logprob(model, ids, start, params=None):
    """Summed log-probability ``(n,)`` of each row's tokens from position ``start[i]`` on (the answer and
    ``<eos>``), optionally with substituted parameters (``torch.func.functional_call``)."""
    torch = import_torch()
    x = ids[:, :-1]
    out = model(x) if params is None else torch.func.functional_call(model, params, (x,))
    logp = torch.log_softmax(out["logits"], -1).gather(-1, ids[:, 1:, None]).squeeze(-1)
    pos = torch.arange(1, ids.shape[1])[None]
    keep = (pos >= start[:, None]) & (ids[:, 1:] != 0)
    return (logp * keep).sum(-1)


@dataclass
class PairTensors:
    """Tokenised pairs with the reference model's numbers.

    Attributes:
        ids_w, ids_l: ``<bos> prompt answer <eos>`` ids ``(n, T)`` of the chosen / rejected answer.
        start_w, start_l: position of the first answer token ``(n,)``.
        ref_w, ref_l: reference log-probabilities of the answers ``(n,)`` (nats).
        d: perplexity differential ``log PPL_ref(rejected) - log PPL_ref(chosen)`` ``(n,)`` (nats per token).
        feats: task encoding ``(n, k)``; task: task index ``(n,)``; correct: 1 where the label is right ``(n,)``.
    """

    ids_w: object
    ids_l: object
    start_w: object
    start_l: object
    ref_w: object
    ref_l: object
    d: object
    feats: object
    task: np.ndarray
    correct: np.ndarray

    def __len__(self) -> int:
        return len(self.task)

    def take(self, idx) -> "PairTensors":
        torch = import_torch()
        t = torch.as_tensor(np.asarray(idx))
        return PairTensors(*(getattr(self, k)[t] for k in ("ids_w", "ids_l", "start_w", "start_l", "ref_w", "ref_l",
                                                           "d", "feats")), self.task[np.asarray(idx)],
                           self.correct[np.asarray(idx)])

    def swapped(self, mask) -> "PairTensors":
        """Chosen and rejected exchanged where ``mask`` (bool ``(n,)``) is set."""
        torch = import_torch()
        m = torch.as_tensor(np.asarray(mask, bool))

        def sw(a, b):
            mm = m.view(-1, *([1] * (a.dim() - 1)))
            return torch.where(mm, b, a), torch.where(mm, a, b)

        (iw, il), (sw_, sl), (rw, rl) = sw(self.ids_w, self.ids_l), sw(self.start_w, self.start_l), sw(self.ref_w, self.ref_l)
        return PairTensors(iw, il, sw_, sl, rw, rl, torch.where(m, -self.d, self.d), self.feats, self.task,
                           np.where(np.asarray(mask, bool), 1 - self.correct, self.correct))


def tensorise(pairs: Pairs, vocab: Vocab, ref, max_len: int) -> PairTensors:
    """Tokenise ``pairs`` and compute the reference log-probabilities, perplexity differentials and the
    task encoding (mean final hidden state of ``ref`` over ``<bos>`` + prompt tokens)."""
    torch = import_torch()

    def enc(answers):
        seqs = [vocab.encode(f"{p} {a}", bos=True, eos=True) for p, a in zip(pairs.prompt, answers)]
        start = [len(p.split()) + 1 for p in pairs.prompt]
        return torch.as_tensor(pad_batch(seqs, max_len)), torch.as_tensor(start)

    ids_w, st_w = enc(pairs.chosen)
    ids_l, st_l = enc(pairs.rejected)
    with torch.no_grad():
        ref_w, ref_l = answer_logprob(ref, ids_w, st_w), answer_logprob(ref, ids_l, st_l)
        n_w = ((torch.arange(1, max_len)[None] >= st_w[:, None]) & (ids_w[:, 1:] != 0)).sum(1)
        n_l = ((torch.arange(1, max_len)[None] >= st_l[:, None]) & (ids_l[:, 1:] != 0)).sum(1)
        d = (-ref_l / n_l) - (-ref_w / n_w)
        hidden = ref(ids_w, return_hidden=True)["hidden"]
        keep = (torch.arange(max_len)[None] < st_w[:, None]).float().unsqueeze(-1)
        feats = (hidden * keep).sum(1) / keep.sum(1)
    return PairTensors(ids_w, ids_l, st_w, st_l, ref_w, ref_l, d, feats, pairs.task, pairs.correct)


def concat(a: PairTensors, b: PairTensors) -> PairTensors:
    """The pairs of ``a`` followed by those of ``b`` (same padded length)."""
    torch = import_torch()
    keys = ("ids_w", "ids_l", "start_w", "start_l", "ref_w", "ref_l", "d", "feats")
    return PairTensors(*(torch.cat([getattr(a, k), getattr(b, k)]) for k in keys),
                       np.concatenate([a.task, b.task]), np.concatenate([a.correct, b.correct]))


#: principal components of the task encoding kept by :func:`normalise`
ENCODING_DIMS = 2


def normalise(train: PairTensors, *others: PairTensors) -> tuple[PairTensors, ...]:
    """Normalised calibration inputs, fitted on ``train`` and applied to it and ``others``.

    ``d`` is divided by its standard deviation over ``train`` (so a slope of 1 means one standard
    deviation of ``d`` moves the logit by 1); the task encoding ``feats`` ``(n, k)`` is centred and
    projected onto its first :data:`ENCODING_DIMS` principal components over ``train``, each scaled to
    unit variance (whitened). Without this the 64 raw hidden-state features and a ``d`` of arbitrary
    scale make one Adam learning rate a different step for TAPC than for the uniform and oracle
    calibrations.

    Returns:
        ``(train, *others)`` normalised (new objects; the inputs are unchanged).

    Raises:
        ValueError: ``train`` has fewer than 2 pairs or a constant ``d``.
    """
    from dataclasses import replace

    torch = import_torch()
    if len(train) < 2:
        raise ValueError(f"train: need at least 2 pairs to normalise, got {len(train)}")
    scale = float(train.d.std())
    if not scale > 0:
        raise ValueError(f"train: the perplexity differential d is constant ({float(train.d[0])}), cannot normalise")
    mean = train.feats.mean(0, keepdim=True)
    _, sv, vt = torch.linalg.svd(train.feats - mean, full_matrices=False)
    k = min(ENCODING_DIMS, vt.shape[0])
    proj = vt[:k].T / (sv[:k] / max(1, len(train) - 1) ** 0.5).clamp_min(1e-12)
    return tuple(replace(p, d=p.d / scale, feats=(p.feats - mean) @ proj) for p in (train, *others))


def compute_ratio(s: "ArmSettings", meta_pairs: int) -> int:
    """How many DPO steps an uncalibrated arm needs per calibrated step to push at least as many
    sequences forward through the policy (:func:`policy_passes`): 5 at the defaults."""
    cal = policy_passes("tapc", s, meta_pairs)["forward"]
    return -(-cal // policy_passes("dpo", s, meta_pairs)["forward"])


def policy_passes(arm: str, s: "ArmSettings", meta_pairs: int) -> dict:
    """Sequences pushed through the policy by one arm over ``s.steps`` steps (each pair = 2 sequences).

    A DPO step: the batch forward and backward. Each of a calibrated arm's ``s.meta_steps`` look-ahead
    meta-steps per DPO step adds the batch
    forward and backward (soft loss at theta), the meta-batch forward and backward (clean loss at
    theta') and two forwards of the batch (central difference). The reference model's passes (once,
    shared) are not counted.

    Returns:
        ``{"forward": n, "backward": n, "meta_forward": n}`` sequence counts (``meta_forward`` is the part
        of ``forward`` spent on the calibration).
    """
    b, m = 2 * s.batch, 2 * min(s.meta_batch, meta_pairs)
    k = s.meta_steps if arm in CALIBRATED else 0
    meta_f, meta_b = k * (b + m + 2 * b), k * (b + m)
    return {"forward": s.steps * (b + meta_f), "backward": s.steps * (b + meta_b), "meta_forward": s.steps * meta_f}


def reference_model(vocab: Vocab, texts: list[str], *, seed: int, steps: int, max_len: int, progress: bool = False):
    """The reference (= initial policy) language model trained on ``texts``; cached in the onchip cache."""
    from .._tiny import cached_model, train

    config = TinyConfig(vocab=len(vocab), d_model=64, n_layers=2, n_heads=4, max_len=max_len)
    data = pad_batch([vocab.encode(t, bos=True, eos=True) for t in texts], max_len)

    def build(model):
        train(model, lambda r: (data[r.integers(0, len(data), 64)],), steps=steps, lr=3e-3, seed=seed,
              progress=progress, desc="reference LM")

    return cached_model("tiny_tapc_ref", config, [seed, steps, len(texts), "\n".join(texts)], build), config


def auc(scores, labels) -> float:
    """Area under the ROC curve: P(score of a random positive > score of a random negative), ties 1/2;
    NaN without both classes."""
    s, y = np.asarray(scores, float), np.asarray(labels).astype(bool)
    pos, neg = s[y], s[~y]
    if pos.size == 0 or neg.size == 0:
        return float("nan")
    return float(((pos[:, None] > neg[None]).sum() + 0.5 * (pos[:, None] == neg[None]).sum()) / (pos.size * neg.size))


def margins(model, b: PairTensors, params=None):
    """Implicit reward margins ``h`` ``(n,)`` of the policy on the pairs ``b``."""
    return margin(answer_logprob(model, b.ids_w, b.start_w, params), answer_logprob(model, b.ids_l, b.start_l, params),
                  b.ref_w, b.ref_l)


def lookahead_hypergradient(model, b: PairTensors, meta: PairTensors, c, *, alpha: float, beta: float,
                            fd_step: float = 1e-3):
    """``dL_clean(theta')/dc`` ``(n,)`` for the one-step look-ahead ``theta' = theta - alpha grad L_soft(theta; c)``.

    ``L_soft`` is :func:`soft_dpo_loss` on the batch ``b`` with confidences ``c`` ``(n,)``; ``L_clean`` is
    :func:`dpo_loss` on the clean batch ``meta``. Since ``d grad L_soft / dc_i = -(beta / n) grad h_i``,
    the hypergradient is ``alpha beta / n * g' . grad h_i(theta)`` with ``g' = grad L_clean(theta')``; the
    directional derivatives come from central differences of ``h`` along ``g'`` (step ``fd_step`` in
    parameter norm).
    """
    torch = import_torch()
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    theta = {n: p.detach() for n, p in model.named_parameters()}
    live = {n: p.detach().clone().requires_grad_(True) for n, p in theta.items()}
    g = torch.autograd.grad(soft_dpo_loss(margins(model, b, live), c.detach(), beta), [live[n] for n in names],
                            allow_unused=True)
    ahead = {**theta, **{n: (theta[n] - alpha * gi).detach().requires_grad_(True) if gi is not None else theta[n]
                         for n, gi in zip(names, g)}}
    gp = torch.autograd.grad(dpo_loss(margins(model, meta, ahead), beta), [ahead[n] for n in names], allow_unused=True)
    gp = {n: (x if x is not None else torch.zeros_like(theta[n])) for n, x in zip(names, gp)}
    norm = torch.sqrt(sum((x ** 2).sum() for x in gp.values()))
    if float(norm) == 0.0:
        return torch.zeros(len(b), dtype=c.dtype)
    eps = fd_step / norm
    with torch.no_grad():
        plus = margins(model, b, {**theta, **{n: theta[n] + eps * gp[n] for n in names}})
        minus = margins(model, b, {**theta, **{n: theta[n] - eps * gp[n] for n in names}})
    directional = (plus - minus) / (2 * eps)
    return alpha * beta / len(b) * directional


@dataclass(frozen=True)
class ArmSettings:
    """Training settings shared by every arm.

    Attributes:
        steps: DPO steps; batch: pairs per step; lr: policy Adam learning rate; beta: DPO temperature;
        eps: the known flip rate (cDPO, rDPO); meta_lr: calibration Adam learning rate; meta_batch:
        clean pairs per meta-step; alpha: look-ahead step size; b0: initial calibration bias (slope 0);
        meta_steps: look-ahead meta-steps per DPO step (each on a fresh clean meta-batch, at the same policy).
    """

    steps: int = 100
    batch: int = 32
    lr: float = 1e-3
    beta: float = 0.5
    eps: float = 0.3
    meta_lr: float = 0.05
    meta_batch: int = 32
    alpha: float = 0.01
    b0: float = 1.0
    meta_steps: int = 1


def calibration_features(arm: str, b: PairTensors):
    """The task encoding an arm's calibration sees: ones (uniform), the task encoder (tapc), one-hot task (oracle)."""
    torch = import_torch()
    if arm == "uniform":
        return torch.ones(len(b), 1)
    if arm == "oracle":
        return torch.eye(2)[torch.as_tensor(b.task)]
    return b.feats


def train_arm(arm: str, ref, config: TinyConfig, train: PairTensors, meta: PairTensors, order: np.ndarray,
              s: ArmSettings, *, seed: int, known: np.ndarray | None = None, progress: bool = False):
    """Train a policy (initialised from ``ref``) with one arm for ``s.steps`` steps over the batches ``order``
    ``(steps, batch)`` of ``train``; returns the policy and, for calibrated arms, the calibration state.

    Args:
        known: bool ``(len(train),)``: pairs known to be right (the clean reference pairs in the pool);
            every arm trains on them with the plain DPO loss (confidence 1, flip rate 0). None: none.

    Returns:
        ``(policy, info)``; ``info`` is empty for uncalibrated arms, else ``{"confidence", "slope",
        "bias"}`` per training pair and ``"late_change"``: the calibration parameters' movement over
        the last quarter of the steps as a share of their whole path (about 0.25 if they still move
        steadily, near 0 once settled).
    """
    torch = import_torch()
    from onchip.progress import progress_bar

    from .._tiny import TinyTransformer

    torch.manual_seed(seed)
    policy = TinyTransformer(config)
    policy.load_state_dict(ref.state_dict())
    policy.train()
    opt = torch.optim.Adam(policy.parameters(), lr=s.lr)
    data = train.swapped(train.correct == 0) if arm == "clean" else train
    known = np.zeros(len(train), bool) if known is None else np.asarray(known, bool)
    info = {}
    if arm in CALIBRATED:
        k = calibration_features(arm, train.take([0])).shape[1]
        weight = torch.zeros(k, 2, requires_grad=True)
        bias = torch.tensor([0.0, s.b0], requires_grad=True)
        meta_opt = torch.optim.Adam([weight, bias], lr=s.meta_lr)
        meta_rng = rng(seed, "meta-batches")  # the same clean batches for every calibrated arm
        path, last = 0.0, torch.cat([weight.detach().flatten(), bias.detach()])
        late_from, late = s.steps - max(1, s.steps // 4), 0.0
    for step in progress_bar(range(s.steps), desc=arm, disable=not progress, leave=False):
        b = data.take(order[step])
        kb = torch.as_tensor(known[order[step]])
        if arm in CALIBRATED:
            for _ in range(s.meta_steps):
                mb = meta.take(meta_rng.choice(len(meta), min(s.meta_batch, len(meta)), replace=False))
                c = calibrated_confidence(b.d, calibration_features(arm, b), weight, bias)
                c = torch.where(kb, torch.ones_like(c), c)
                hyper = lookahead_hypergradient(policy, b, mb, c, alpha=s.alpha, beta=s.beta)
                meta_opt.zero_grad()
                (hyper.detach() * c).sum().backward()
                meta_opt.step()
            with torch.no_grad():
                now = torch.cat([weight.detach().flatten(), bias.detach()])
                move = float((now - last).norm())
                path, last = path + move, now
                late += move if step >= late_from else 0.0
                c = calibrated_confidence(b.d, calibration_features(arm, b), weight, bias)
                c = torch.where(kb, torch.ones_like(c), c)
        h = margins(policy, b)
        eps = torch.where(kb, torch.zeros(len(b)), torch.full((len(b),), float(s.eps)))
        if arm in ("dpo", "clean", "dpo-long"):
            loss = dpo_loss(h, s.beta)
        elif arm == "cdpo":
            loss = cdpo_loss(h, s.beta, eps)
        elif arm in ("rdpo", "rdpo-long"):
            loss = rdpo_loss(h, s.beta, eps)
        else:
            loss = soft_dpo_loss(h, c, s.beta)
        opt.zero_grad()
        loss.backward()
        opt.step()
    policy.eval()
    if arm in CALIBRATED:
        with torch.no_grad():
            c_all = calibrated_confidence(train.d, calibration_features(arm, train), weight, bias).numpy()
            ab = (calibration_features(arm, train) @ weight + bias).numpy()
        info = {"confidence": c_all, "slope": ab[:, 0], "bias": ab[:, 1],
                "late_change": late / path if path > 0 else 0.0}
    return policy, info


def preference_accuracy(policy, b: PairTensors) -> np.ndarray:
    """Per pair: 1 where the policy's implicit reward ranks the (clean) chosen answer above the rejected one,
    1/2 on a tie, else 0 ``(n,)``."""
    torch = import_torch()
    with torch.no_grad():
        h = margins(policy, b).numpy()
    return np.where(h > 0, 1.0, np.where(h == 0, 0.5, 0.0))
