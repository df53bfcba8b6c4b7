"""Local MAP sampling (LMAPS) for inverse problems with a diffusion prior, with DPS and DAPS baselines.

Zhang, Brekelmans, Ver Steeg, "Local MAP Sampling for Diffusion Models", ICML 2026
(arXiv 2510.07343). See ``seeds/lmaps.md`` for what is implemented and verified.

Modules: :mod:`.priors` (exact Gaussian-mixture prior, digits denoiser),
:mod:`.operators` (measurement operators), :mod:`.samplers` (LMAPS, DPS, DAPS),
:mod:`.metrics` (PSNR, SSIM).
"""
