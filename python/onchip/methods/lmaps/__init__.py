"""Local MAP sampling (LMAPS) for inverse problems with a diffusion prior, with DPS and DAPS baselines.

Zhang, Brekelmans, Ver Steeg, "Local MAP Sampling for Diffusion Models", ICML 2026
(arXiv 2510.07343). See ``seeds/lmaps.md`` for what is implemented and verified.

Modules: :mod:`.priors` (exact Gaussian-mixture prior, digits denoiser),
:mod:`.operators` (measurement operators), :mod:`.samplers` (LMAPS, DPS, DAPS),
:mod:`.metrics` (PSNR, SSIM).
"""

# the names live here, free of torch, so the command line can offer them without loading it
#: measurement operators (:mod:`.operators`)
OPERATORS = ("inpaint-random", "inpaint-box", "blur", "downsample", "quantize")
#: samplers (:mod:`.samplers`); ``lmaps-sample`` is the ablation: a draw from LMAPS's local posterior, not its mode
METHODS = ("lmaps", "lmaps-sample", "dps", "daps")
#: priors (:mod:`.priors`): the Gaussian mixture with exact inference, or the trained digits denoiser
PRIORS = ("gmm", "digits")
