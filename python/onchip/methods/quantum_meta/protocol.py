"""Few-shot budget protocol: predict the saturation gain and the useful budget from N probe steps.

Source: arXiv 2601.18973, Sec. "A few-shot protocol": run the first N = 3..5
adaptation steps on a new device, fit G_k = G_sat (1 - exp(-beta k)) to the
observed gains G_k = L_0 - L_k (k = 0..N), and read off the saturation gain
G_sat and the budget K* = ceil(ln(1 / (1 - f)) / beta), the number of steps
reaching the fraction f of it. The prediction is compared with the gain
measured after a long adaptation run (our saturation reference) and with the
first K reaching f of that measured gain.
"""

from __future__ import annotations

import numpy as np


def fit_probe(losses) -> tuple[float, float]:
    """Fit the saturating curve to the losses L_0..L_N of one device.

    Args:
        losses: (N + 1,) losses, N >= 2 (three points are the minimum that fix G_sat and beta).
    Returns:
        (g_sat, beta); (0, nan) when the device shows no gain at all. G_sat is
        bounded by L_0 (a loss cannot fall below zero), which keeps a probe that
        looks linear from extrapolating to an unbounded gain.
    Raises:
        ValueError: fewer than 3 losses or non-finite values.
    """
    from scipy.optimize import curve_fit

    losses = np.asarray(losses, float)
    if losses.ndim != 1 or losses.size < 3:
        raise ValueError(f"losses: expected at least 3 values L_0..L_N, got shape {losses.shape}")
    if not np.all(np.isfinite(losses)):
        raise ValueError("losses: non-finite values")
    g = losses[0] - losses
    k = np.arange(losses.size, dtype=float)
    if g[-1] <= 0:
        return 0.0, float("nan")
    # geometric start: successive gain increments shrink by exp(-beta)
    d = np.diff(g)
    r = d[1:] / d[:-1] if np.all(d[:-1] > 0) else np.array([0.5])
    r0 = float(np.clip(np.median(r), 0.05, 0.98))
    b0 = -np.log(r0)
    a0 = float(np.clip(g[1] / (1 - r0) if g[1] > 0 else g[-1], g[-1], max(losses[0], g[-1] * (1 + 1e-9))))
    try:
        popt, _ = curve_fit(lambda kk, a, b: a * (1 - np.exp(-b * kk)), k, g, p0=[a0, b0],
                            bounds=([0.0, 1e-4], [max(losses[0], g[-1] * (1 + 1e-9)), 50.0]), maxfev=20000)
    except RuntimeError:
        popt = (a0, b0)
    return float(popt[0]), float(popt[1])


def budget_from_beta(beta: float, fraction: float) -> int:
    """K* = ceil(ln(1 / (1 - f)) / beta): steps that reach the fraction f of the saturation gain.

    Raises:
        ValueError: fraction not in (0, 1) or beta not > 0.
    """
    if not 0 < fraction < 1:
        raise ValueError(f"fraction: expected a value in (0, 1), got {fraction!r}")
    if not np.isfinite(beta) or beta <= 0:
        raise ValueError(f"beta: expected a finite value > 0, got {beta!r}")
    return int(np.ceil(np.log(1.0 / (1.0 - fraction)) / beta - 1e-9))


def measured_budget(gains, g_sat: float, fraction: float) -> int:
    """First k with gains[k] >= fraction * g_sat (len(gains) - 1 if never reached)."""
    gains = np.asarray(gains, float)
    hit = np.nonzero(gains >= fraction * g_sat)[0]
    return int(hit[0]) if hit.size else int(gains.size - 1)


def evaluate_protocol(losses, n_probe: int, fraction: float) -> dict:
    """Protocol predictions against the long-run measurement, per device.

    Args:
        losses: (K_long + 1, B) loss curves; the last row is the saturation reference.
        n_probe: N probe steps used for the prediction (2 <= N < K_long).
        fraction: f in (0, 1) defining K*.
    Returns:
        dict with per-device arrays (g_sat_pred, g_sat_meas, k_star_pred, k_star_meas)
        and summaries: median relative error of G_sat and of K* over devices, and the
        relative error of the mean predicted G_sat against the mean measured G_sat.
    Raises:
        ValueError: bad n_probe / fraction or too short curves.
    """
    losses = np.asarray(losses, float)
    if losses.ndim != 2:
        raise ValueError(f"losses: expected shape (K_long + 1, B), got {losses.shape}")
    if not isinstance(n_probe, (int, np.integer)) or not 2 <= n_probe < losses.shape[0] - 1:
        raise ValueError(f"n_probe: expected an integer in [2, {losses.shape[0] - 2}], got {n_probe!r}")
    if not 0 < fraction < 1:
        raise ValueError(f"fraction: expected a value in (0, 1), got {fraction!r}")
    gains = losses[0] - losses  # (K+1, B)
    g_meas = gains[-1]
    pred, beta, kp, km = [], [], [], []
    for b in range(losses.shape[1]):
        a, bt = fit_probe(losses[: n_probe + 1, b])
        pred.append(a)
        beta.append(bt)
        kp.append(budget_from_beta(bt, fraction) if np.isfinite(bt) else 0)
        km.append(measured_budget(gains[:, b], g_meas[b], fraction))
    pred, kp, km = np.array(pred), np.array(kp, float), np.array(km, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel_g = np.abs(pred - g_meas) / np.abs(g_meas)
        rel_k = np.abs(kp - km) / np.maximum(km, 1)
    return {
        "g_sat_pred": pred, "g_sat_meas": g_meas, "beta_pred": np.array(beta),
        "k_star_pred": kp, "k_star_meas": km,
        "rel_err_g_sat_median": float(np.nanmedian(rel_g)),
        "rel_err_g_sat_mean": float(np.nanmean(rel_g)),
        "rel_err_k_star_median": float(np.nanmedian(rel_k)),
        "rel_err_k_star_mean": float(np.nanmean(rel_k)),
        "rel_err_g_sat_of_mean": float(abs(pred.mean() - g_meas.mean()) / abs(g_meas.mean())),
    }
