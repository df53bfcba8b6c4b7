"""Golden models: hand-worked steps, an independent reference, schedules, float twin."""

import numpy as np
import pytest

from onchip.fixed import Fmt, quantize, requantize
from onchip.model import GoldenLearner, initial_parameters, split_parameters
from onchip.model.basis import basis_table, local_basis
from onchip.model.float_twin import FloatTwin
from onchip.spec import PRESETS, Formats, LearnerSpec
from support import smooth_stream


# -- basis ------------------------------------------------------------------------------
def test_cubic_basis_matches_closed_form():
    t = np.linspace(0, 1, 17, endpoint=False)
    v, d = local_basis(t, 3)
    closed = np.stack([(1 - t) ** 3, 3 * t**3 - 6 * t**2 + 4, -3 * t**3 + 3 * t**2 + 3 * t + 1, t**3], 1) / 6
    dclosed = np.stack([-3 * (1 - t) ** 2, 9 * t**2 - 12 * t, -9 * t**2 + 6 * t + 3, 3 * t**2], 1) / 6
    np.testing.assert_allclose(v, closed, atol=1e-14)
    np.testing.assert_allclose(d, dclosed, atol=1e-14)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_basis_table_partition_of_unity(k):
    fmt = Fmt(16, 2, True, "RND_CONV", "SAT")
    values, derivs = basis_table(k, 6, fmt)
    assert values.shape == (64, k + 1)
    # each entry is rounded to nearest: the sum is within (k+1)/2 LSB of 1 and of 0
    assert np.all(np.abs(values.sum(1) - 2**14) <= (k + 1) / 2)
    assert np.all(np.abs(derivs.sum(1)) <= (k + 1) / 2)


# -- a hand-worked step -------------------------------------------------------------------
def test_kan_step_by_hand():
    # 1->1, linear splines, G = 4 cells of width 1 on [-2, 2): x = 0.25 lies in cell 2 at t = 1/4,
    # basis (0.75, 0.25) on coefficients 2 and 3.
    spec = LearnerSpec(kind="kan", widths=(1, 1), grid_size=4, spline_order=1, grid_range=(-2, 2),
                       learning_rate=0.5, init_scale=0.0)
    coef = Fmt(16, 4, True, "RND_CONV", "SAT")
    theta = quantize([0, 0, 1.0, -1.0, 0], coef)
    g = GoldenLearner(spec, theta=theta)
    pred = g.step(g.quantize_inputs([[0.25]])[0], g.quantize_targets([[1.5]])[0])
    assert g.dequantize_outputs(pred)[0] == 0.75 * 1.0 + 0.25 * -1.0
    # error e = 0.5 - 1.5 = -1; coefficient c <- c - lr * e * b
    np.testing.assert_array_equal(coef.dequantize(g.theta), [0, 0, 1.375, -0.875, 0])


def test_mlp_step_by_hand():
    # 1->2->1 ReLU: hidden z = (2x, -x), output = h0 - h1 + 0.5
    spec = LearnerSpec(kind="mlp", widths=(1, 2, 1), learning_rate=0.25)
    coef = Fmt(16, 4, True, "RND_CONV", "SAT")
    theta = quantize([2.0, -1.0, 0.0, 0.0, 1.0, -1.0, 0.5], coef)  # W1, b1, W2, b2
    g = GoldenLearner(spec, theta=theta)
    pred = g.step(g.quantize_inputs([[0.5]])[0], g.quantize_targets([[2.0]])[0])
    assert g.dequantize_outputs(pred)[0] == 1.0 + 0.5  # h = (1, 0)
    # e = -0.5; dW2 = e*h = (-0.5, 0); db2 = e; hidden error = W2*e masked by ReLU = (-0.5, 0)
    # dW1 = (-0.5*0.5, 0); db1 = (-0.5, 0); theta -= 0.25 * grads
    expected = [2.0 + 0.0625, -1.0, 0.125, 0.0, 1.0 + 0.125, -1.0, 0.5 + 0.125]
    np.testing.assert_array_equal(coef.dequantize(g.theta), expected)


# -- an independent reference written from the documented rounding points ------------------
def _reference_kan_layer(spec, coef, u, f_u):
    """Forward of one KAN layer with numpy arrays; returns (out raw, cells, addr, clamped)."""
    f = spec.formats
    p = f_u.frac_bits + spec.cell_exp
    lo = int(quantize(spec.grid_range[0], f_u))
    v = u - lo
    clamped = (v < 0) | (v >= spec.grid_size << p)
    v = np.clip(v, 0, (spec.grid_size << p) - 1)
    cell, addr = v >> p, (v >> (p - spec.basis_table_bits)) % (1 << spec.basis_table_bits)
    bval, bder = basis_table(spec.spline_order, spec.basis_table_bits, f.basis)
    idx = cell[:, None] + np.arange(spec.spline_order + 1)
    active = np.take_along_axis(coef, np.broadcast_to(idx, coef.shape[:2] + idx.shape[1:]), axis=2)
    prods = requantize(active * bval[addr], f.coef.frac_bits + f.basis.frac_bits, f.acc)
    s = requantize(prods.sum(axis=(1, 2)), f.acc.frac_bits, f.acc)  # WRAP sum
    out = requantize(s, f.acc.frac_bits, f.act)
    return out, cell, addr, clamped, active, bval[addr], bder[addr]


def _reference_kan_run(spec, theta, xs, ys):
    f = spec.formats
    theta = theta.copy()
    preds = []
    for x, y in zip(xs, ys):
        layers = split_parameters(spec, theta)
        acts, saved = [x], []
        for n, layer in enumerate(layers):
            out, cell, addr, clamped, active, b, d = _reference_kan_layer(
                spec, layer["coef"], acts[-1], f.input if n == 0 else f.act)
            acts.append(out)
            saved.append((cell, clamped, active, b, d))
        preds.append(acts[-1].copy())
        err = requantize(acts[-1] - y, f.act.frac_bits, f.grad)
        updates = []
        for n in range(len(layers) - 1, -1, -1):
            cell, clamped, active, b, d = saved[n]
            upd = requantize(err[:, None, None] * b[None], f.grad.frac_bits + f.basis.frac_bits + spec.lr_shift, f.coef)
            updates.append((n, cell, upd))
            if n == 0:
                break
            sd = requantize(active * d[None], f.coef.frac_bits + f.basis.frac_bits, f.acc).sum(axis=2)
            dphi = requantize(requantize(sd, f.acc.frac_bits, f.acc), f.acc.frac_bits + spec.cell_exp, f.grad)
            back = requantize(err[:, None] * dphi, 2 * f.grad.frac_bits, f.acc).sum(axis=0)
            err = np.where(clamped, 0, requantize(requantize(back, f.acc.frac_bits, f.acc), f.acc.frac_bits, f.grad))
        for n, cell, upd in updates:
            coef = split_parameters(spec, theta)[n]["coef"]  # a view into theta
            for i, c in enumerate(cell):
                sl = coef[:, i, c : c + spec.spline_order + 1]
                sl[...] = requantize(sl - upd[:, i, :], f.coef.frac_bits, f.coef)
    return np.array(preds), theta


@pytest.mark.parametrize(
    "widths, k",
    [((1, 1), 3), ((2, 1), 1), ((2, 3, 1), 3), ((2, 4, 2), 2)],
)
def test_kan_equals_independent_reference(widths, k):
    spec = LearnerSpec(kind="kan", widths=widths, grid_size=8, spline_order=k, grid_range=(-2, 2),
                       learning_rate=2**-3, init_scale=0.5)
    xs, ys = smooth_stream(spec, 300)
    g = GoldenLearner(spec)
    preds = g.run(xs, ys)
    ref_preds, ref_theta = _reference_kan_run(spec, initial_parameters(spec), xs, ys)
    np.testing.assert_array_equal(preds, ref_preds)
    np.testing.assert_array_equal(g.theta, ref_theta)


def _reference_mlp_run(spec, theta, xs, ys):
    f = spec.formats
    theta = theta.copy()
    preds = []
    for x, y in zip(xs, ys):
        layers = split_parameters(spec, theta)
        acts = [x]
        for n, layer in enumerate(layers):
            f_in = f.input if n == 0 else f.act
            prods = requantize(layer["weight"] * acts[-1][None, :], f.coef.frac_bits + f_in.frac_bits, f.acc)
            s = requantize(prods.sum(1) + requantize(layer["bias"], f.coef.frac_bits, f.acc), f.acc.frac_bits, f.acc)
            z = requantize(s, f.acc.frac_bits, f.act)
            acts.append(np.maximum(z, 0) if n < len(layers) - 1 else z)
        preds.append(acts[-1].copy())
        err = requantize(acts[-1] - y, f.act.frac_bits, f.grad)
        new = []
        for n in range(len(layers) - 1, -1, -1):
            f_in = f.input if n == 0 else f.act
            dw = requantize(err[:, None] * acts[n][None, :], f.grad.frac_bits + f_in.frac_bits + spec.lr_shift, f.coef)
            db = requantize(err, f.grad.frac_bits + spec.lr_shift, f.coef)
            new.append((n, dw, db))
            if n > 0:
                back = requantize(layers[n]["weight"] * err[:, None], f.coef.frac_bits + f.grad.frac_bits, f.acc).sum(0)
                back = requantize(requantize(back, f.acc.frac_bits, f.acc), f.acc.frac_bits, f.grad)
                err = np.where(acts[n] > 0, back, 0)
        for n, dw, db in new:
            layer = split_parameters(spec, theta)[n]
            layer["weight"][...] = requantize(layer["weight"] - dw, f.coef.frac_bits, f.coef)
            layer["bias"][...] = requantize(layer["bias"] - db, f.coef.frac_bits, f.coef)
    return np.array(preds), theta


@pytest.mark.parametrize("widths", [(1, 16, 1), (2, 8, 1), (3, 4, 4, 2)])
def test_mlp_equals_independent_reference(widths):
    spec = LearnerSpec(kind="mlp", widths=widths, learning_rate=2**-4, init_scale=1.0)
    xs, ys = smooth_stream(spec, 300, seed=1)
    g = GoldenLearner(spec)
    preds = g.run(xs, ys)
    ref_preds, ref_theta = _reference_mlp_run(spec, initial_parameters(spec), xs, ys)
    np.testing.assert_array_equal(preds, ref_preds)
    np.testing.assert_array_equal(g.theta, ref_theta)


def test_narrow_formats_equal_reference():
    # 8-bit data: rounding and saturation are exercised on most samples
    spec = LearnerSpec(kind="kan", widths=(2, 2, 1), grid_size=4, spline_order=2, grid_range=(-2, 2),
                       basis_table_bits=3, formats=Formats.uniform(8, 3), learning_rate=0.5, init_scale=1.0)
    xs, ys = smooth_stream(spec, 400, seed=2, lo=-4, hi=4)
    g = GoldenLearner(spec)
    np.testing.assert_array_equal(g.run(xs, ys), _reference_kan_run(spec, initial_parameters(spec), xs, ys)[0])


# -- learning behaviour -------------------------------------------------------------------
def test_sparse_update_touches_k_plus_one_coefficients_per_edge():
    spec = PRESETS["kan-readout"].replace(init_scale=0.5)
    xs, ys = smooth_stream(spec, 50, seed=3)
    g = GoldenLearner(spec)
    for x, y in zip(xs, ys):
        before = g.theta.copy()
        g.step(x, y)
        changed = (g.theta != before).reshape(spec.n_in, spec.n_coef).sum(axis=1)
        assert np.all(changed <= spec.spline_order + 1)


def test_coefficients_saturate():
    spec = PRESETS["kan-regression"].replace(learning_rate=1.0)
    g = GoldenLearner(spec)
    x = g.quantize_inputs(np.full((200, 1), 0.3))
    y = g.quantize_targets(np.full((200, 1), 7.99))
    preds = g.run(x, y)
    assert g.theta.max() == spec.formats.coef.max_raw  # pushed to the top, held there
    assert preds[-1, 0] > preds[0, 0]


@pytest.mark.parametrize("preset", ["kan-regression", "mlp-regression"])
def test_learners_fit_a_smooth_function(preset):
    spec = PRESETS[preset]
    rng = np.random.default_rng(4)
    x = rng.uniform(-2, 2, (30000, 1))
    y = np.sin(np.pi * x / 2)
    g = GoldenLearner(spec)
    err = g.dequantize_outputs(g.run(g.quantize_inputs(x), g.quantize_targets(y))) - y
    assert np.mean(err[-2000:] ** 2) < 0.01 * np.mean(y**2)
    assert np.mean(err[-2000:] ** 2) < 0.1 * np.mean(err[:500] ** 2)


# -- schedules ------------------------------------------------------------------------------
@pytest.mark.parametrize("preset", list(PRESETS))
def test_pipelined_sees_updates_d_samples_late(preset):
    depth = 3
    seq = PRESETS[preset].replace(init_scale=0.5)
    pipe = seq.replace(schedule="pipelined", staleness=depth)
    xs, ys = smooth_stream(seq, 40, seed=5)
    preds = GoldenLearner(pipe).run(xs, ys)
    # the first D+1 samples all see the initial parameters
    np.testing.assert_array_equal(preds[: depth + 1], GoldenLearner(seq).predict(xs[: depth + 1]))
    # sample D+1 sees exactly the update of sample 0
    g = GoldenLearner(seq)
    g.step(xs[0], ys[0])
    np.testing.assert_array_equal(preds[depth + 1], g.predict(xs[depth + 1 : depth + 2])[0])
    assert not np.array_equal(preds, GoldenLearner(seq).run(xs, ys))


def test_pipelined_with_zero_staleness_is_sequential_and_flush_commits():
    seq = PRESETS["kan-readout"].replace(init_scale=0.5)
    xs, ys = smooth_stream(seq, 500, seed=6)
    a = GoldenLearner(seq.replace(schedule="pipelined", staleness=0))
    b = GoldenLearner(seq)
    np.testing.assert_array_equal(a.run(xs, ys), b.run(xs, ys))
    p = GoldenLearner(seq.replace(schedule="pipelined", staleness=4))
    p.run(xs, ys)
    assert p.pending == 4
    before = p.theta.copy()
    p.flush()
    assert p.pending == 0 and not np.array_equal(before, p.theta)


def test_chunked_runs_equal_one_run():
    spec = PRESETS["mlp-readout"].replace(schedule="pipelined", staleness=5)
    xs, ys = smooth_stream(spec, 300, seed=7)
    whole = GoldenLearner(spec).run(xs, ys)
    g = GoldenLearner(spec)
    parts = np.concatenate([g.run(xs[a : a + 70], ys[a : a + 70]) for a in range(0, 300, 70)])
    np.testing.assert_array_equal(whole, parts)


def test_reset_and_load():
    spec = PRESETS["kan-readout"]
    xs, ys = smooth_stream(spec, 100, seed=8)
    g = GoldenLearner(spec)
    first = g.run(xs, ys)
    learned = g.theta.copy()
    g.reset()
    np.testing.assert_array_equal(g.run(xs, ys), first)
    g.load(learned)
    np.testing.assert_array_equal(g.theta, learned)
    with pytest.raises(ValueError, match="shape"):
        g.load(learned[:-1])
    with pytest.raises(ValueError, match="outside"):
        g.load(np.full_like(learned, 2**20))


# -- float twin -----------------------------------------------------------------------------
@pytest.mark.parametrize("preset", list(PRESETS))
def test_float_twin_tracks_golden(preset):
    spec = PRESETS[preset]
    rng = np.random.default_rng(9)
    x = rng.uniform(-2, 2, (300, spec.n_in))
    y = np.sin(x.sum(1, keepdims=True))
    g = GoldenLearner(spec)
    gold = g.dequantize_outputs(g.run(g.quantize_inputs(x), g.quantize_targets(y)))
    twin = FloatTwin(spec).run(x, y)
    # 16-bit formats: the quantized learner stays within a few 1e-3 of the float one
    assert np.max(np.abs(gold - twin)) < 0.02
    assert np.max(np.abs(gold - twin)) > 0  # it is really quantized
