"""Metrics of the unlearning literature: accuracies, membership inference, gap to retraining.

- Accuracy on the forget set, the retain set and the test set (and, for class
  forgetting, on the test samples of the forgotten class).
- Membership-inference attack (MIA) on the forget set: a logistic-regression
  attack on two per-sample features of the model's output, the softmax
  probability of the true label (confidence) and the predictive entropy,
  trained to tell retain samples (members) from test samples (non-members),
  then applied to the forget set. ``mia_forget`` is the fraction of forget
  samples it calls members (the "MIA-efficacy" protocol of Jia et al. 2023,
  "Model sparsity can simplify machine unlearning", and of OEU,
  arXiv:2602.00567, Sec. 5); the retrained model is the reference value.
- Average gap to the retrained model: mean absolute difference, in percentage
  points, of forget/retain/test accuracy and ``mia_forget`` (Jia et al. 2023).
"""

from __future__ import annotations

import numpy as np

from .._scores import accuracy

GAP_KEYS = ("forget_acc", "retain_acc", "test_acc", "mia_forget")


def softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax of ``(n, c)`` logits, in float64."""
    z = np.asarray(logits, np.float64)
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def attack_features(logits: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``(n, 2)`` attack features: [softmax probability of the true label, entropy in nats]."""
    p = softmax(logits)
    conf = p[np.arange(len(y)), y]
    ent = -(p * np.log(np.clip(p, 1e-300, None))).sum(axis=1)
    return np.stack([conf, ent], axis=1)


def mia_attack_rate(
    member: np.ndarray, nonmember: np.ndarray, target: np.ndarray, seed: int = 0
) -> float:
    """Fraction of ``target`` rows an attack trained on ``member`` vs ``nonmember`` calls members.

    All three are ``(n, k)`` feature arrays (see :func:`attack_features`).
    The larger of the two training groups is subsampled (seeded) to the size
    of the smaller one so the attack's prior is 1/2. The attack is
    ``sklearn.linear_model.LogisticRegression`` on standardised features.

    Raises:
        ValueError: any of the three arrays is empty.
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    for name, arr in (("member", member), ("nonmember", nonmember), ("target", target)):
        if len(arr) == 0:
            raise ValueError(f"mia_attack_rate: {name} set is empty")
    rng = np.random.default_rng(seed)
    n = min(len(member), len(nonmember))
    m = member[rng.choice(len(member), n, replace=False)]
    nm = nonmember[rng.choice(len(nonmember), n, replace=False)]
    x = np.concatenate([m, nm])
    y = np.concatenate([np.ones(n), np.zeros(n)])
    attack = make_pipeline(StandardScaler(), LogisticRegression())
    attack.fit(x, y)
    return float(attack.predict(target).mean())


def evaluate(model, split, seed: int = 0) -> dict:
    """Accuracies, MIA and mean forget-set entropy of ``model`` on ``split``.

    Returns a dict with ``forget_acc``, ``retain_acc``, ``test_acc`` (fractions),
    ``test_forget_class_acc`` (class forgetting only, else None),
    ``mia_forget`` (fraction), ``forget_entropy`` (mean entropy on the forget
    set divided by ``log(n_classes)``: 1 = uniform prediction).
    """
    from .models import predict_logits

    lf = predict_logits(model, split.x_train[split.forget])
    lr = predict_logits(model, split.x_train[split.retain])
    lt = predict_logits(model, split.x_test)
    yf, yr = split.y_train[split.forget], split.y_train[split.retain]
    ff, fr, ft = attack_features(lf, yf), attack_features(lr, yr), attack_features(lt, split.y_test)
    cls = split.forget_class
    out = {
        "forget_acc": accuracy(lf, yf),
        "retain_acc": accuracy(lr, yr),
        "test_acc": accuracy(lt, split.y_test),
        "test_forget_class_acc": accuracy(lt[split.y_test == cls], split.y_test[split.y_test == cls]) if cls is not None else None,
        "mia_forget": mia_attack_rate(fr, ft, ff, seed),
        "forget_entropy": float(ff[:, 1].mean() / np.log(split.n_classes)),
    }
    return out


def average_gap(metrics: dict, reference: dict, keys=GAP_KEYS) -> float:
    """Mean of ``|metrics[k] - reference[k]|`` over ``keys``, in percentage points.

    Raises:
        KeyError: a key is missing from either dict.
    """
    return float(np.mean([abs(metrics[k] - reference[k]) for k in keys]) * 100.0)
