"""Open-system gate simulation: Lindblad master equation with piecewise-constant controls.

Source: "When does adaptation win? Scaling laws for meta-learning in quantum
control" (arXiv 2601.18973), Sec. "Quantum control tasks": a gate is the
channel produced by the Lindblad equation

    d rho / dt = -i [H(t), rho] + sum_j ( L_j rho L_j^+ - 1/2 {L_j^+ L_j, rho} ),
    H(t) = H_0 + sum_k s_k u_k(t) P_k / 2,

with controls u_k constant on each of N segments of length dt = T / N, drift
H_0, per-device control scale factors s_k (drive miscalibration) and collapse
operators L_j (relaxation, dephasing). Units: time in units of the gate
duration T = 1, angular frequencies and rates in 1/T, hbar = 1.

Density matrices are vectorised row-major (``rho.reshape(-1)``), so that
vec(A X B) = (A kron B^T) vec(X). A segment's propagator is expm(L dt) of the
Liouvillian L; the gate channel is the ordered product of the N propagators.
Two implementations share this convention: NumPy/SciPy (``scipy.linalg.expm``,
and ``scipy.integrate.solve_ivp`` as an independent check) and a batched,
autograd-friendly PyTorch one (``torch.linalg.matrix_exp``) used for training.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

I2 = np.eye(2, dtype=complex)
SX = np.array([[0, 1], [1, 0]], dtype=complex)
SY = np.array([[0, -1j], [1j, 0]], dtype=complex)
SZ = np.array([[1, 0], [0, -1]], dtype=complex)
SM = np.array([[0, 1], [0, 0]], dtype=complex)  # sigma_minus = |0><1|, |1> is the excited state
CZ = np.diag([1, 1, 1, -1]).astype(complex)


def _check_square(name: str, a: np.ndarray) -> np.ndarray:
    a = np.asarray(a, dtype=complex)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"{name}: expected a square matrix, got shape {a.shape}")
    return a


def hamiltonian_superop(h: np.ndarray) -> np.ndarray:
    """Superoperator of rho -> -i [h, rho] (row-major vectorisation).

    Args:
        h: (d, d) Hermitian matrix.
    Returns:
        (d^2, d^2) complex matrix.
    Raises:
        ValueError: ``h`` is not square.
    """
    h = _check_square("h", h)
    eye = np.eye(h.shape[0])
    return -1j * (np.kron(h, eye) - np.kron(eye, h.T))


def dissipator_superop(c_ops: list[np.ndarray], dim: int) -> np.ndarray:
    """Superoperator of sum_j D[L_j] rho = L rho L^+ - 1/2 {L^+ L, rho}.

    Args:
        c_ops: collapse operators, each (dim, dim); the rate is folded into the
            operator (L = sqrt(gamma) * A).
        dim: Hilbert-space dimension d.
    Returns:
        (d^2, d^2) complex matrix (zero when ``c_ops`` is empty).
    Raises:
        ValueError: an operator is not (dim, dim).
    """
    eye = np.eye(dim)
    out = np.zeros((dim * dim, dim * dim), dtype=complex)
    for j, c in enumerate(c_ops):
        c = _check_square(f"c_ops[{j}]", c)
        if c.shape[0] != dim:
            raise ValueError(f"c_ops[{j}]: shape {c.shape} does not match dim={dim}")
        cdc = c.conj().T @ c
        out += np.kron(c, c.conj()) - 0.5 * np.kron(cdc, eye) - 0.5 * np.kron(eye, cdc.T)
    return out


def unitary_superop(u: np.ndarray) -> np.ndarray:
    """Superoperator of rho -> U rho U^+ (row-major vectorisation): U kron conj(U), (d^2, d^2)."""
    u = _check_square("u", u)
    return np.kron(u, u.conj())


def average_gate_fidelity(superop: np.ndarray, target: np.ndarray) -> float:
    """Average gate fidelity of a channel to a target unitary (Nielsen 2002).

    F_pro = Tr(S_U^+ S) / d^2 and F_avg = (d F_pro + 1) / (d + 1), the average of
    <psi| U^+ E(|psi><psi|) U |psi> over Haar-random pure states.

    Args:
        superop: (d^2, d^2) channel superoperator.
        target: (d, d) unitary.
    Raises:
        ValueError: the shapes do not match.
    """
    target = _check_square("target", target)
    d = target.shape[0]
    if superop.shape != (d * d, d * d):
        raise ValueError(f"superop: shape {superop.shape} does not match a {d}-level target")
    f_pro = np.trace(unitary_superop(target).conj().T @ superop).real / d**2
    return float((d * f_pro + 1) / (d + 1))


def pauli_eigenstates_1q() -> np.ndarray:
    """The six eigenstates of X, Y, Z: a single-qubit state 2-design, shape (6, 2)."""
    s = 1 / np.sqrt(2)
    return np.array(
        [[1, 0], [0, 1], [s, s], [s, -s], [s, 1j * s], [s, -1j * s]], dtype=complex
    )


def mub_states_2q() -> np.ndarray:
    """The 20 states of the 5 mutually unbiased bases of two qubits, shape (20, 4).

    Each basis is the common eigenbasis of three commuting two-qubit Paulis;
    a complete set of MUBs is a complex projective 2-design (Klappenecker and
    Roetteler 2005), so the mean fidelity over these states equals the
    average gate fidelity exactly.
    """
    p = {"I": I2, "X": SX, "Y": SY, "Z": SZ}
    groups = [("ZI", "IZ"), ("XI", "IX"), ("YI", "IY"), ("XY", "YZ"), ("YX", "ZY")]
    states = []
    for a, b in groups:
        pa = np.kron(p[a[0]], p[a[1]])
        pb = np.kron(p[b[0]], p[b[1]])
        # 1.0 and 0.37 give four distinct eigenvalues +-1 +-0.37
        _, vecs = np.linalg.eigh(pa + 0.37 * pb)
        states.extend(vecs.T)
    return np.array(states)


def state_average_fidelity(superop: np.ndarray, target: np.ndarray, states: np.ndarray) -> float:
    """Mean of <psi| U^+ E(|psi><psi|) U |psi> over a set of pure input states.

    Equals :func:`average_gate_fidelity` when the states form a 2-design.

    Args:
        superop: (d^2, d^2) channel superoperator.
        target: (d, d) unitary.
        states: (m, d) state vectors (normalised here).
    Raises:
        ValueError: shapes do not match or a state is zero.
    """
    target = _check_square("target", target)
    d = target.shape[0]
    states = np.asarray(states, dtype=complex)
    if states.ndim != 2 or states.shape[1] != d:
        raise ValueError(f"states: expected shape (m, {d}), got {states.shape}")
    norms = np.linalg.norm(states, axis=1)
    if np.any(norms == 0):
        raise ValueError("states: a state vector is zero")
    states = states / norms[:, None]
    fids = []
    for psi in states:
        rho = np.outer(psi, psi.conj()).reshape(-1)
        out = (superop @ rho).reshape(d, d)
        phi = target @ psi
        fids.append((phi.conj() @ out @ phi).real)
    return float(np.mean(fids))


@dataclass(frozen=True)
class GateProblem:
    """A target gate, its controls and its analytic reference pulse.

    Attributes:
        name: "x" or "cz".
        dim: Hilbert-space dimension d (2 or 4).
        target: (d, d) target unitary.
        control_ops: (n_ctrl, d, d) Hermitian operators P_k; H_c = sum_k u_k P_k / 2.
        control_names: one label per control.
        n_segments: N piecewise-constant segments over the duration T = 1.
        reference: (N, n_ctrl) analytic pulse reaching fidelity 1 on the nominal
            noiseless device.
        fidelity_states: (m, d) input states whose mean fidelity is the figure of
            merit (a 2-design, so equal to the average gate fidelity).
    """

    name: str
    dim: int
    target: np.ndarray
    control_ops: np.ndarray
    control_names: tuple[str, ...]
    n_segments: int
    reference: np.ndarray
    fidelity_states: np.ndarray
    duration: float = 1.0
    _cache: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def n_controls(self) -> int:
        return int(self.control_ops.shape[0])

    @property
    def dt(self) -> float:
        return self.duration / self.n_segments


def _check_segments(n_segments: int) -> int:
    if not isinstance(n_segments, (int, np.integer)) or isinstance(n_segments, bool) or n_segments < 1:
        raise ValueError(f"n_segments: expected a positive integer, got {n_segments!r}")
    return int(n_segments)


def x_gate_problem(n_segments: int = 10) -> GateProblem:
    """One qubit, target X, controls on sigma_x and sigma_y.

    Analytic pulse: u_x = pi / T constant (a pi rotation about x, exp(-i pi X / 2)
    = -i X, equal to X up to a global phase).

    Raises:
        ValueError: ``n_segments`` is not a positive integer.
    """
    n = _check_segments(n_segments)
    ref = np.zeros((n, 2))
    ref[:, 0] = np.pi
    return GateProblem(
        name="x", dim=2, target=SX.copy(), control_ops=np.stack([SX, SY]),
        control_names=("x", "y"), n_segments=n, reference=ref,
        fidelity_states=pauli_eigenstates_1q(),
    )


def cz_gate_problem(n_segments: int = 8) -> GateProblem:
    """Two qubits, target CZ, local x/y/z controls per qubit and a tunable ZZ coupling.

    Controls P_k: X1, Y1, Z1, X2, Y2, Z2, Z1Z2. Since
    CZ = exp(i pi/4 (I - Z1 - Z2 + Z1 Z2)), the analytic pulse is
    u_z1 = u_z2 = pi / (2T), u_zz = -pi / (2T), everything else zero (all
    terms commute). The per-device ZZ drift enters through H_0 (see tasks.py).

    Raises:
        ValueError: ``n_segments`` is not a positive integer.
    """
    n = _check_segments(n_segments)
    ops = [np.kron(SX, I2), np.kron(SY, I2), np.kron(SZ, I2),
           np.kron(I2, SX), np.kron(I2, SY), np.kron(I2, SZ), np.kron(SZ, SZ)]
    ref = np.zeros((n, 7))
    ref[:, 2] = ref[:, 5] = np.pi / 2
    ref[:, 6] = -np.pi / 2
    return GateProblem(
        name="cz", dim=4, target=CZ.copy(), control_ops=np.stack(ops),
        control_names=("x1", "y1", "z1", "x2", "y2", "z2", "zz"), n_segments=n,
        reference=ref, fidelity_states=mub_states_2q(),
    )


def gate_problem(name: str, n_segments: int | None = None) -> GateProblem:
    """:func:`x_gate_problem` or :func:`cz_gate_problem` by name ("x" or "cz").

    Raises:
        ValueError: unknown ``name``.
    """
    if name == "x":
        return x_gate_problem() if n_segments is None else x_gate_problem(n_segments)
    if name == "cz":
        return cz_gate_problem() if n_segments is None else cz_gate_problem(n_segments)
    raise ValueError(f"gate: expected 'x' or 'cz', got {name!r}")


def _check_controls(problem: GateProblem, u: np.ndarray) -> np.ndarray:
    u = np.asarray(u, dtype=float)
    if u.shape != (problem.n_segments, problem.n_controls):
        raise ValueError(
            f"u: expected shape ({problem.n_segments}, {problem.n_controls}), got {u.shape}"
        )
    return u


def channel_expm(problem: GateProblem, h0: np.ndarray, c_ops: list[np.ndarray],
                 u: np.ndarray, ctrl_scale: np.ndarray | None = None) -> np.ndarray:
    """Gate channel as the product of per-segment expm(L dt), with SciPy.

    Args:
        problem: the gate.
        h0: (d, d) drift Hamiltonian.
        c_ops: collapse operators, each (d, d).
        u: (N, n_ctrl) control amplitudes.
        ctrl_scale: (n_ctrl,) multiplicative drive factors (default 1).
    Returns:
        (d^2, d^2) superoperator.
    Raises:
        ValueError: wrong shapes.
    """
    from scipy.linalg import expm

    u = _check_controls(problem, u)
    scale = np.ones(problem.n_controls) if ctrl_scale is None else np.asarray(ctrl_scale, float)
    if scale.shape != (problem.n_controls,):
        raise ValueError(f"ctrl_scale: expected shape ({problem.n_controls},), got {scale.shape}")
    diss = dissipator_superop(c_ops, problem.dim)
    s = np.eye(problem.dim**2, dtype=complex)
    for seg in u:
        h = h0 + np.einsum("k,kij->ij", scale * seg, problem.control_ops) / 2
        s = expm((hamiltonian_superop(h) + diss) * problem.dt) @ s
    return s


def evolve_ode(problem: GateProblem, h0: np.ndarray, c_ops: list[np.ndarray], u: np.ndarray,
               rho0: np.ndarray, ctrl_scale: np.ndarray | None = None) -> np.ndarray:
    """Integrate the master equation for one initial state with ``solve_ivp`` (RK45, tight tolerances).

    An independent check of :func:`channel_expm`: it works on the (d, d) density
    matrix directly, without superoperators.

    Returns:
        (d, d) final density matrix.
    Raises:
        ValueError: wrong shapes.
    """
    from scipy.integrate import solve_ivp

    u = _check_controls(problem, u)
    d = problem.dim
    scale = np.ones(problem.n_controls) if ctrl_scale is None else np.asarray(ctrl_scale, float)
    rho = np.asarray(rho0, dtype=complex)
    if rho.shape != (d, d):
        raise ValueError(f"rho0: expected shape ({d}, {d}), got {rho.shape}")
    for seg in u:
        h = h0 + np.einsum("k,kij->ij", scale * seg, problem.control_ops) / 2

        def rhs(_t, y, h=h):
            r = y.reshape(d, d)
            dr = -1j * (h @ r - r @ h)
            for c in c_ops:
                cdc = c.conj().T @ c
                dr += c @ r @ c.conj().T - 0.5 * (cdc @ r + r @ cdc)
            return dr.reshape(-1)

        sol = solve_ivp(rhs, (0.0, problem.dt), rho.reshape(-1), rtol=1e-10, atol=1e-12)
        rho = sol.y[:, -1].reshape(d, d)
    return rho


# ---------------------------------------------------------------- PyTorch, batched


def _torch_constants(problem: GateProblem):
    """Control generators -i[P_k/2, .] and the fidelity-state tensors, cached per problem."""
    import torch

    if "torch" not in problem._cache:
        gens = np.stack([hamiltonian_superop(p / 2) for p in problem.control_ops])
        states = problem.fidelity_states / np.linalg.norm(problem.fidelity_states, axis=1)[:, None]
        rho_in = np.stack([np.outer(s, s.conj()).reshape(-1) for s in states], axis=1)
        phi = states @ problem.target.T  # rows U|psi>
        rho_tgt = np.stack([np.outer(p, p.conj()).reshape(-1) for p in phi], axis=1)
        problem._cache["torch"] = (
            torch.tensor(gens, dtype=torch.complex128),
            torch.tensor(rho_in, dtype=torch.complex128),
            torch.tensor(rho_tgt, dtype=torch.complex128),
        )
    return problem._cache["torch"]


def channel_torch(problem: GateProblem, l_drift, ctrl_scale, u):
    """Batched gate channels, differentiable in ``u``.

    Args:
        problem: the gate.
        l_drift: (B, d^2, d^2) complex128 Liouvillian of drift plus dissipation.
        ctrl_scale: (B, n_ctrl) float64 drive factors.
        u: (B, N, n_ctrl) float64 controls.
    Returns:
        (B, d^2, d^2) complex128 superoperators.
    Raises:
        ValueError: shapes do not agree.
    """
    import torch

    gens, _, _ = _torch_constants(problem)
    b = l_drift.shape[0]
    if u.shape != (b, problem.n_segments, problem.n_controls):
        raise ValueError(
            f"u: expected shape ({b}, {problem.n_segments}, {problem.n_controls}), got {tuple(u.shape)}"
        )
    if ctrl_scale.shape != (b, problem.n_controls):
        raise ValueError(f"ctrl_scale: expected shape ({b}, {problem.n_controls}), got {tuple(ctrl_scale.shape)}")
    amp = (u * ctrl_scale[:, None, :]).to(torch.complex128)
    liou = l_drift[:, None] + torch.einsum("bnk,kij->bnij", amp, gens)
    props = torch.linalg.matrix_exp(liou * problem.dt)
    s = props[:, 0]
    for n in range(1, problem.n_segments):
        s = props[:, n] @ s
    return s


def fidelity_torch(problem: GateProblem, superops):
    """Mean state fidelity over ``problem.fidelity_states`` (a 2-design: the average gate fidelity).

    Args:
        superops: (B, d^2, d^2) complex128 channels.
    Returns:
        (B,) float64 fidelities.
    """
    import torch

    _, rho_in, rho_tgt = _torch_constants(problem)
    out = superops @ rho_in  # (B, d^2, m)
    # Tr(rho_tgt^+ rho_out) per state: rho_tgt is Hermitian, so conj() gives the overlap
    return torch.einsum("im,bim->bm", rho_tgt.conj(), out).real.mean(dim=1)
