"""A small EDM-preconditioned denoiser for 8x8 digits, its training loop and its sampler.

Preconditioning, loss weighting, training noise distribution and the deterministic Heun
sampler follow Karras et al. 2022, "Elucidating the design space of diffusion-based generative
models" (EDM), Table 1 and Algorithm 1. Restricting training noise to one band of sigma and
swapping denoisers inside a band implement the regime experiments and the targeted
intervention of arXiv 2602.17846 (Sec. 5).
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from .._rl import mlp


class EDMDenoiser(nn.Module):
    """``D(x; sigma) = c_skip x + c_out F(c_in x, c_noise)`` with an MLP ``F``.

    Args:
        dim: data dimension d (64 for 8x8 images).
        sigma_data: standard deviation of the data, used by the preconditioning.
        width: hidden width of ``F``.
        depth: number of hidden layers of ``F``.
        n_freq: Fourier features of ``c_noise = ln(sigma)/4`` fed to ``F``.

    ``forward(x, sigma)``: ``x`` (B, d) float32, ``sigma`` (B,) positive; returns (B, d).
    """

    def __init__(self, dim: int = 64, sigma_data: float = 0.5, width: int = 256, depth: int = 3, n_freq: int = 16):
        super().__init__()
        if dim < 1 or width < 1 or depth < 1 or n_freq < 1 or not sigma_data > 0:
            raise ValueError(f"EDMDenoiser: dim/width/depth/n_freq must be >= 1 and sigma_data > 0, got "
                             f"{dim}, {width}, {depth}, {n_freq}, {sigma_data}")
        self.sigma_data = float(sigma_data)
        self.register_buffer("freq", torch.randn(n_freq, generator=torch.Generator().manual_seed(0)) * 4.0)
        self.net = mlp(dim + 2 * n_freq, dim, width, depth, activation="silu")

    def forward(self, x: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        s = sigma.reshape(-1, 1)
        sd2 = self.sigma_data**2
        c_skip = sd2 / (s**2 + sd2)
        c_out = s * self.sigma_data / torch.sqrt(s**2 + sd2)
        c_in = 1 / torch.sqrt(s**2 + sd2)
        angle = (torch.log(s) / 4) * self.freq[None] * 2 * math.pi
        h = torch.cat([c_in * x, torch.sin(angle), torch.cos(angle)], dim=1)
        return c_skip * x + c_out * self.net(h)


def train_denoiser(
    model: EDMDenoiser,
    train: np.ndarray,
    steps: int,
    seed: int,
    sigma_band: tuple[float, float] | None = None,
    batch_size: int = 128,
    lr: float = 1e-3,
    p_mean: float = -1.2,
    p_std: float = 1.2,
    progress: bool = False,
) -> EDMDenoiser:
    """Minimise the EDM-weighted denoising loss on ``train`` (N, d) for ``steps`` Adam steps.

    Noise levels are ``exp(N(p_mean, p_std^2))`` (EDM) or, with ``sigma_band=(lo, hi)``,
    log-uniform in the band (regime-restricted training). Modifies and returns ``model``.

    Raises:
        ValueError: ``steps < 0`` or an empty/non-positive band.
    """
    if steps < 0:
        raise ValueError(f"steps: must be >= 0, got {steps!r}")
    if sigma_band is not None and not 0 < sigma_band[0] < sigma_band[1]:
        raise ValueError(f"sigma_band: need 0 < lo < hi, got {sigma_band!r}")
    gen = torch.Generator().manual_seed(seed)
    data = torch.as_tensor(train, dtype=torch.float32)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sd2 = model.sigma_data**2
    model.train()
    for _ in tqdm(range(steps), desc="train denoiser", disable=not progress, mininterval=2):
        y = data[torch.randint(len(data), (batch_size,), generator=gen)]
        if sigma_band is None:
            sigma = torch.exp(p_mean + p_std * torch.randn(batch_size, generator=gen))
        else:
            lo, hi = math.log(sigma_band[0]), math.log(sigma_band[1])
            sigma = torch.exp(lo + (hi - lo) * torch.rand(batch_size, generator=gen))
        weight = (sigma**2 + sd2) / (sigma * model.sigma_data) ** 2
        noisy = y + sigma[:, None] * torch.randn(y.shape, generator=gen)
        loss = (weight * ((model(noisy, sigma) - y) ** 2).mean(1)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    return model


Denoise = Callable[[np.ndarray, float], np.ndarray]


def as_denoise(model: EDMDenoiser) -> Denoise:
    """Wrap a torch denoiser as ``f(x (n, d) float64, sigma float) -> (n, d) float64``."""

    def f(x: np.ndarray, sigma: float) -> np.ndarray:
        with torch.no_grad():
            xt = torch.as_tensor(x, dtype=torch.float32)
            return model(xt, torch.full((len(x),), float(sigma))).double().numpy()

    return f


def regime_switch(base: Denoise, other: Denoise, band: tuple[float, float]) -> Denoise:
    """Denoiser that calls ``other`` for ``band[0] <= sigma <= band[1]`` and ``base`` elsewhere.

    This is the targeted intervention of arXiv 2602.17846 (Sec. 5) when ``band`` is the
    medium regime and ``other`` a weaker or generalising denoiser.
    """
    lo, hi = band
    return lambda x, sigma: other(x, sigma) if lo <= sigma <= hi else base(x, sigma)


def edm_sigmas(steps: int = 18, sigma_min: float = 0.002, sigma_max: float = 80.0, rho: float = 7.0) -> np.ndarray:
    """EDM time discretisation (Karras et al. 2022, eq. 5), ``steps`` levels then 0, shape (steps+1,)."""
    i = np.arange(steps)
    s = (sigma_max ** (1 / rho) + i / (steps - 1) * (sigma_min ** (1 / rho) - sigma_max ** (1 / rho))) ** rho
    return np.append(s, 0.0)


def edm_sample(denoise: Denoise, n: int, dim: int, seed: int, steps: int = 18,
               sigma_max: float = 80.0) -> np.ndarray:
    """Deterministic Heun sampler of the probability-flow ODE (EDM Algorithm 1), returns (n, dim).

    ``denoise(x, sigma)`` is any denoiser ``(n, d) -> (n, d)``; the initial noise is drawn
    from ``N(0, sigma_max^2 I)`` with ``seed``.
    """
    t = edm_sigmas(steps, sigma_max=sigma_max)
    x = np.random.default_rng(seed).standard_normal((n, dim)) * t[0]
    for i in range(steps):
        d = (x - denoise(x, t[i])) / t[i]
        x_next = x + (t[i + 1] - t[i]) * d
        if t[i + 1] > 0:
            d2 = (x_next - denoise(x_next, t[i + 1])) / t[i + 1]
            x_next = x + (t[i + 1] - t[i]) * 0.5 * (d + d2)
        x = x_next
    return x
