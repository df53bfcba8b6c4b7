"""A small EDM-preconditioned denoiser for 8x8 digits, its training loop and its sampler.

Preconditioning, loss weighting, training noise distribution and the deterministic Heun
sampler follow Karras et al. 2022, "Elucidating the design space of diffusion-based generative
models" (EDM), Table 1 and Algorithm 1. Restricting training noise to one band of sigma and
swapping denoisers inside a band implement the regime experiments and the targeted
intervention of arXiv 2602.17846 (Sec. 5).
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np
import torch
from torch import nn
from onchip.progress import progress_bar

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
    for _ in progress_bar(range(steps), desc="train denoiser", disable=not progress, mininterval=2):
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


def band_grid(bands: Sequence[tuple[float, float]], steps_per_band: int, rho: float = 7.0
              ) -> tuple[np.ndarray, np.ndarray]:
    """A decreasing sigma grid built band by band, the same number of steps in every band.

    Each band ``(lo, hi)`` gets ``steps_per_band`` steps from ``hi`` down to ``lo`` with the EDM
    spacing of Karras et al. 2022 (eq. 5, exponent ``rho``) inside the band; consecutive bands
    share their edge. With :func:`heun_sample` (two denoiser calls per step) every band then
    holds ``2 * steps_per_band`` calls, so swapping the denoiser in one band changes as much
    computation as in any other (the 18-step EDM grid puts 4 of its 35 calls in the medium band
    of the 8x8 digits and 12 in the small one).

    Args:
        bands: ``(lo, hi)`` per band, from the largest noise down, each band's ``lo`` the next
            band's ``hi``; sigmas positive.
        steps_per_band: steps per band (>= 1).
        rho: EDM spacing exponent (1: uniform in sigma; large: close to log-uniform).

    Returns:
        ``(sigmas, band_of_step)``: sigmas, shape (len(bands) * steps_per_band + 1,), strictly
        decreasing from the first band's ``hi`` to the last band's ``lo``; ``band_of_step``
        (len(bands) * steps_per_band,) the index of the band each step lies in.

    Raises:
        ValueError: ``steps_per_band < 1``, a band with ``not 0 < lo < hi``, or bands that do
            not join from the largest noise down.
    """
    if steps_per_band < 1:
        raise ValueError(f"steps_per_band: must be >= 1, got {steps_per_band!r}")
    for k, (lo, hi) in enumerate(bands):
        if not 0 < lo < hi:
            raise ValueError(f"bands[{k}]: need 0 < lo < hi, got {(lo, hi)!r}")
        if k and hi != bands[k - 1][0]:
            raise ValueError(f"bands[{k}]: must start where band {k - 1} ends ({bands[k - 1][0]}), got {hi}")
    i = np.arange(steps_per_band + 1) / steps_per_band
    parts = [(hi ** (1 / rho) + i * (lo ** (1 / rho) - hi ** (1 / rho))) ** rho for lo, hi in bands]
    sigmas = np.concatenate([parts[0]] + [p[1:] for p in parts[1:]])
    return sigmas, np.repeat(np.arange(len(bands)), steps_per_band)


def heun_sample(step_denoisers: Sequence[Denoise], sigmas: np.ndarray, n: int, dim: int, seed: int,
                clip: tuple[float, float] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Deterministic Heun sampler of the probability-flow ODE (EDM Algorithm 1) on a given grid.

    Step ``i`` goes from ``sigmas[i]`` to ``sigmas[i + 1]`` with the denoiser
    ``step_denoisers[i]``, called twice (Euler predictor, then the trapezoidal corrector). The
    grid ends at its last (positive) sigma: there is no final Euler jump to sigma = 0, so every
    step costs exactly two calls (on [-1, 1] pixels, ``sigmas[-1] = 0.002`` leaves noise of
    that standard deviation).

    Args:
        step_denoisers: one ``denoise(x (n, d), sigma) -> (n, d)`` per step.
        sigmas: strictly decreasing positive noise levels, shape (steps + 1,).
        n, dim: samples and data dimension.
        seed: draws the initial noise ``N(0, sigmas[0]^2 I)``.
        clip: ``(lo, hi)`` clips every denoised estimate to the data range (DDPM samplers'
            ``clip_denoised``): each Heun step is then a linear combination of the current point
            (weight ``sigma_next / sigma`` < 1) and bounded estimates, so one sample that leaves the
            data manifold cannot run off to 1e7 where an MLP extrapolates. The empirical optimal denoiser (a convex combination of
            training images) is unchanged by it. None: no clipping.

    Returns:
        ``(x, calls)``: samples (n, dim) float64 and the denoiser calls of each step (steps,).

    Raises:
        ValueError: ``sigmas`` not strictly decreasing and positive, or one denoiser per step missing.
    """
    sigmas = np.asarray(sigmas, float)
    if sigmas.ndim != 1 or len(sigmas) < 2 or np.any(sigmas <= 0) or np.any(np.diff(sigmas) >= 0):
        raise ValueError(f"sigmas: need a strictly decreasing positive grid of >= 2 levels, got {sigmas!r}")
    if len(step_denoisers) != len(sigmas) - 1:
        raise ValueError(f"step_denoisers: need one per step ({len(sigmas) - 1}), got {len(step_denoisers)}")
    x = np.random.default_rng(seed).standard_normal((n, dim)) * sigmas[0]
    calls = np.zeros(len(sigmas) - 1, dtype=int)
    for i, f in enumerate(step_denoisers):
        denoise = f if clip is None else (lambda z, s, f=f: np.clip(f(z, s), *clip))
        t, t_next = sigmas[i], sigmas[i + 1]
        d = (x - denoise(x, t)) / t
        x_next = x + (t_next - t) * d
        d2 = (x_next - denoise(x_next, t_next)) / t_next
        x = x + (t_next - t) * 0.5 * (d + d2)
        calls[i] = 2
    return x, calls


def edm_sample(denoise: Denoise, n: int, dim: int, seed: int, steps: int = 18,
               sigma_max: float = 80.0) -> np.ndarray:
    """Deterministic Heun sampler of the probability-flow ODE (EDM Algorithm 1), returns (n, dim).

    ``denoise(x, sigma)`` is any denoiser ``(n, d) -> (n, d)``; the initial noise is drawn
    from ``N(0, sigma_max^2 I)`` with ``seed``. The EDM grid (:func:`edm_sigmas`) ends with an
    Euler jump to sigma = 0 (``2 * steps - 1`` calls); the band experiment uses
    :func:`band_grid` with :func:`heun_sample` instead.
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
