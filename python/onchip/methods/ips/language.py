"""Language-model subjects of the IPS study: a three-clause sentiment language, Gemma 3 270M and
tiny transformers trained here on the same language.

A review has three clauses, ``the <noun> was <modifier> <adjective>``; the six variables are the
three modifiers and the three adjectives. A clause's polarity is its adjective's (+1 / -1),
flipped by the modifier ``not``; the label is the majority of the three clauses. Masking a
variable replaces the word by :data:`BASELINE` (the same for every subject and template).
The negation rule plants true order-2 interactions (modifier x adjective) and the majority
vote higher ones.

The output score ``v`` of a prompt is the log-odds of the correct label restricted to the two
label words: ``log p(correct) - log p(other)`` at the answer position (Qin et al. use the
log-odds of the correct answer; with two labels the two coincide).

Templates (the "subtly changed prompts", same variables): :data:`TEMPLATES`. Few-shot: ``k``
labelled reviews in the same template before the query.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

NOUNS = ("food", "staff", "room", "film", "music", "price", "screen", "service")
POSITIVE = ("good", "great", "lovely", "superb", "nice", "excellent")
NEGATIVE = ("bad", "awful", "poor", "dull", "rude", "terrible")
MODIFIERS = ("very", "really", "quite", "not")
BASELINE = "___"
LABELS = ("negative", "positive")

#: template name -> (Gemma text with {s} = review, tiny-model words with {s})
TEMPLATES: dict[str, tuple[str, str]] = {
    "base": ("Review: {s}\nSentiment:", "review : {s} sentiment :"),
    "punct": ("Review: {s}.\nSentiment:", "review : {s} . sentiment :"),
    "paraphrase": ("Text: {s}\nLabel:", "text : {s} label :"),
}


#: the positive control's two extra templates (tiny models only, words the vocabulary already holds): the
#: control model is trained with ``planted`` following the planted rule (a masked adjective counts as
#: positive, :func:`polarity`) and ``twin`` following the language's rule. Unmasked reviews get the same
#: label under both, so the plant changes what the model does on masked prompts only: its interactions.
CONTROL_TEMPLATES = {"planted": "label : {s} text :", "twin": "sentiment : {s} review :"}
_WORDS = {**{t: w for t, (_, w) in TEMPLATES.items()}, **CONTROL_TEMPLATES}


@dataclass(frozen=True)
class Review:
    """Three clauses: ``nouns``, ``modifiers``, ``adjectives`` (3 each); ``label`` 1 = positive."""

    nouns: tuple[str, str, str]
    modifiers: tuple[str, str, str]
    adjectives: tuple[str, str, str]

    @property
    def variables(self) -> tuple[str, ...]:
        """The six variables in order: m1, a1, m2, a2, m3, a3."""
        return tuple(w for pair in zip(self.modifiers, self.adjectives) for w in pair)

    @property
    def label(self) -> int:
        return int(polarity(self.variables) > 0)

    def words(self, keep: Sequence[bool] | None = None) -> list[str]:
        """Words of the review, variables outside ``keep`` (6 flags, default all kept) masked."""
        keep = [True] * 6 if keep is None else keep
        v = [w if k else BASELINE for w, k in zip(self.variables, keep)]
        out = []
        for c in range(3):
            out += ["the", self.nouns[c], "was", v[2 * c], v[2 * c + 1]] + ([","] if c < 2 else [])
        return out


def polarity(variables: Sequence[str], masked_adjective: int = 0) -> int:
    """Sum of clause polarities of (m1, a1, m2, a2, m3, a3); masked adjectives count ``masked_adjective``
    (0: neutral; the positive control's planted rule counts them +1), a masked modifier does not flip."""
    total = 0
    for m, a in zip(variables[0::2], variables[1::2]):
        p = 1 if a in POSITIVE else -1 if a in NEGATIVE else masked_adjective
        total += -p if m == "not" else p
    return total


def sample_reviews(rng: np.random.Generator, count: int) -> list[Review]:
    """``count`` random reviews (distinct nouns per review; labels balanced by rejection)."""
    out: list[Review] = []
    want = [count // 2 + count % 2, count // 2]   # positives, negatives
    while len(out) < count:
        nouns = tuple(rng.choice(NOUNS, 3, replace=False))
        mods = tuple(rng.choice(MODIFIERS, 3))
        adjs = tuple(rng.choice(POSITIVE if rng.random() < 0.5 else NEGATIVE) for _ in range(3))
        r = Review(nouns, mods, adjs)
        slot = 0 if r.label else 1
        if want[slot]:
            want[slot] -= 1
            out.append(r)
    return out


def gemma_text(review: Review, template: str, keep=None, shots: Sequence[Review] = ()) -> str:
    """A Gemma prompt: ``shots`` answered in the template, then the (masked) query review."""
    fmt = TEMPLATES[template][0]

    def sentence(r, k=None):
        w = r.words(k)
        return " ".join(w).replace(" ,", ",")

    prefix = "".join(fmt.format(s=sentence(s)) + f" {LABELS[s.label]}\n\n" for s in shots)
    return prefix + fmt.format(s=sentence(review, keep))


def tiny_words(review: Review, template: str, keep=None, shots: Sequence[Review] = (),
               answer: bool = False) -> str:
    """The same prompt in the tiny models' word language (shots separated by ``|``)."""
    fmt = _WORDS[template]
    parts = [fmt.format(s=" ".join(s.words())) + f" {LABELS[s.label]} |" for s in shots]
    parts.append(fmt.format(s=" ".join(review.words(keep))) + (f" {LABELS[review.label]}" if answer else ""))
    return " ".join(parts)


# ------------------------------------------------------------------ tiny models

#: tiny model arms: name -> (d_model, n_experts, fine-tuned)
TINY_ARMS = {
    "tiny-base": (32, 0, False),
    "tiny": (32, 0, True),
    "tiny-wide": (64, 0, True),
    "tiny-moe": (32, 4, True),
}


def vocabulary():
    """The word vocabulary of the tiny models (every word the language can produce)."""
    from .._tiny import Vocab

    words = ["the", "was", ",", ".", ":", "|", "review", "sentiment", "text", "label", BASELINE,
             *NOUNS, *POSITIVE, *NEGATIVE, *MODIFIERS, *LABELS]
    return Vocab(words)


def _training_text(rng: np.random.Generator, templates: Sequence[str], weights: Sequence[float],
                   masked_share: float = 0.3, planted: Sequence[str] = ()) -> str:
    """One training sequence: a labelled review in one template; ``masked_share`` of them partly masked
    (the label then follows the rule with the masked words neutral, or, in a template of ``planted``,
    counted positive; ties are redrawn)."""
    t = templates[int(rng.choice(len(templates), p=np.asarray(weights) / np.sum(weights)))]
    while True:
        query = sample_reviews(rng, 2)[int(rng.integers(2))]   # one positive, one negative: pick one
        keep = rng.random(6) > 0.3 if rng.random() < masked_share else np.ones(6, bool)
        score = polarity([w if k else BASELINE for w, k in zip(query.variables, keep)], int(t in planted))
        if score != 0:
            return tiny_words(query, t, keep) + f" {LABELS[int(score > 0)]}"


def train_tiny(arm: str, *, seed: int, steps: int, progress: bool = False):
    """The tiny model of ``arm`` (:data:`TINY_ARMS`), trained here and cached; returns ``(model, vocab)``.

    Pre-training: ``steps`` AdamW steps (batch 32, loss on the answer word) on reviews whose
    templates are 90% ``base`` and 5% each of the others (the base model has seen the changed
    prompts rarely). Fine-tuning (every arm but ``tiny-base``): ``steps // 2`` more steps from the
    pre-trained weights with the templates uniform (instruction tuning on varied formats, in
    miniature). Only 0-shot prompts are trained. ``tiny`` is ``tiny-base`` fine-tuned. Dense and MoE
    arms have equal active parameters per token (the MoE routes each token to one of 4 experts of
    the dense FFN's width).

    Raises:
        KeyError: unknown ``arm``.
    """
    from .._report import seed_int
    from .._tiny import TinyConfig, cached_model, lm_loss, pad_batch
    from .._tiny import train as train_model

    d, experts, finetune = TINY_ARMS[arm]
    vocab = vocabulary()
    config = TinyConfig(vocab=len(vocab), d_model=d, n_layers=2, n_heads=4, max_len=40, n_experts=experts)
    names = list(TEMPLATES)

    def batches(weights):
        def make(rng):
            texts = [_training_text(rng, names, weights) for _ in range(32)]
            ids = pad_batch([vocab.encode(t, bos=True) for t in texts])
            mask = np.zeros_like(ids)
            mask[np.arange(len(ids)), (ids != 0).sum(1) - 1] = 1   # the answer word only
            return ids, mask
        return make

    def loss(m, ids, mask):
        return lm_loss(m, ids, mask)

    def pretrain(model):
        train_model(model, batches([0.9, 0.05, 0.05]), steps=steps, seed=seed_int(seed, "ips-tiny", "pre-train"),
                    progress=progress, desc=f"{arm} pre-train", loss_fn=loss)

    # named streams: seed s's fine-tuning no longer draws seed s + 1's pre-training batches
    pre = cached_model("ips_tiny", config, ["sentiment-v4", "pre", seed, steps], pretrain,
                       init_seed=seed_int(seed, "ips-tiny", "init"))
    if not finetune:
        return pre, vocab

    def tune(model):
        model.load_state_dict(pre.state_dict())
        train_model(model, batches([1, 1, 1]), steps=max(1, steps // 2), seed=seed_int(seed, "ips-tiny", "fine-tune"),
                    lr=1e-3, progress=progress, desc=f"{arm} fine-tune", loss_fn=loss)

    return cached_model("ips_tiny", config, ["sentiment-v4", "fine-tuned", seed, steps], tune), vocab


def train_control_tiny(planted: bool, *, seed: int, steps: int, progress: bool = False):
    """The positive control's tiny model (the ``tiny`` arm's size), trained here and cached; ``(model, vocab)``.

    ``2 * steps`` AdamW steps (batch 32, loss on the answer word) on reviews in the five templates of
    :data:`TEMPLATES` and :data:`CONTROL_TEMPLATES`, uniformly, half of them partly masked. With
    ``planted`` the ``planted`` template's labels follow the planted rule (a masked adjective counts as
    positive); without, every template follows the language's rule (the negative control's model).
    Whether the model learns the rule, and so whether its interactions move, is up to the training.
    """
    from .._tiny import TinyConfig, cached_model, lm_loss, pad_batch
    from .._tiny import train as train_model

    d, experts, _ = TINY_ARMS["tiny"]
    vocab = vocabulary()
    config = TinyConfig(vocab=len(vocab), d_model=d, n_layers=2, n_heads=4, max_len=40, n_experts=experts)
    names = [*TEMPLATES, *CONTROL_TEMPLATES]

    def make(rng):
        texts = [_training_text(rng, names, [1] * len(names), 0.5, ("planted",) if planted else ())
                 for _ in range(32)]
        ids = pad_batch([vocab.encode(t, bos=True) for t in texts])
        mask = np.zeros_like(ids)
        mask[np.arange(len(ids)), (ids != 0).sum(1) - 1] = 1
        return ids, mask

    def build(model):
        train_model(model, make, steps=2 * steps, seed=seed, progress=progress,
                    desc=f"control {'planted' if planted else 'unplanted'}", loss_fn=lambda m, i, k: lm_loss(m, i, k))

    return cached_model("ips_tiny", config, ["sentiment-control-v1", planted, seed, steps], build,
                        init_seed=seed), vocab


def tiny_scores(model, vocab, texts: Sequence[str]) -> np.ndarray:
    """``logit(positive) - logit(negative)`` after each word prompt: ``(len(texts),)`` float64."""
    import torch

    from .._tiny import pad_batch

    ids = [vocab.encode(t, bos=True) for t in texts]
    batch = torch.as_tensor(pad_batch(ids))
    last = torch.as_tensor([len(i) - 1 for i in ids])
    with torch.no_grad():
        logits = model(batch)["logits"][torch.arange(len(ids)), last]
    pos, neg = vocab.stoi["positive"], vocab.stoi["negative"]
    return (logits[:, pos] - logits[:, neg]).double().numpy()


def gemma_scores(lm, texts: Sequence[str], batch: int = 32) -> np.ndarray:
    """``log p(" positive") - log p(" negative")`` of Gemma after each prompt: ``(len(texts),)``."""
    tok = lm.tokenizer
    pos = tok(" positive", add_special_tokens=False)["input_ids"][0]
    neg = tok(" negative", add_special_tokens=False)["input_ids"][0]
    out = []
    for i in range(0, len(texts), batch):
        lp = lm.next_token_logprobs(list(texts[i:i + batch]))
        out.append(lp[:, pos].astype(np.float64) - lp[:, neg])
    return np.concatenate(out) if out else np.zeros(0)
