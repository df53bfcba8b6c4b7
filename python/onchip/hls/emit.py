"""Emit Vitis HLS C++ for a :class:`~onchip.spec.LearnerSpec`.

The C++ mirrors :mod:`onchip.model.kernels` statement by statement: every
signal has the ``ap_fixed`` type of its golden format (:meth:`Fmt.cpp`), and
every golden rounding point is one ``ap_fixed`` assignment (round with the
target's quantization mode, then saturate or wrap: the order
:func:`onchip.fixed.requant` uses). Products are exact (``ap_fixed``
multiplication widens), sums accumulate in ``acc_t`` whose WRAP overflow
makes them order-free, and the learning-rate and cell-width scalings are
exact binary-point moves (:file:`onchip_fixed.h`, ``scale_pow2``). The
schedule is :mod:`onchip.model.stream`: a sequential learner commits each
update before the next sample; a pipelined one keeps D updates in a FIFO:
once sample n has read the parameters, the update of sample n - D is
committed (read-before-write) and that of sample n queued; the FIFO is
flushed before the parameters are read out or replaced.

Channels (``spec.channels`` = N > 1): the parameters are N banks, ``theta[N_CHANNELS][N_PARAM]``,
each with its reset values (``<TOP>_THETA_INIT`` nested per channel); every sample carries its
channel in one more stream word after the existing fields, and is predicted and learned with that
channel's bank. Each channel is a sequential learner (the schedule's staleness does not apply),
so channel c equals a single-channel learner run on c's samples alone. The parameter port reads
or loads one channel's bank at a time, the channel given in the call's ``n_samples`` argument.

Files of a project (:func:`emit`):

* ``<top>.h``: formats, sizes, basis tables, initial parameters, the top's prototype;
* ``<top>.cpp``: the per-layer kernels and the top function (AXI4-Stream ports);
* ``onchip_fixed.h``: bit-level helpers;
* ``onchip_csim.cpp``: the C-simulation program (stream protocol on stdin/stdout);
* ``onchip_tb.cpp``: a self-checking Vitis test bench (csim and cosim);
* ``run_hls.tcl``: the Vitis HLS script (csim, csynth, cosim, export IP).

Method: the fixed-point online learners of :mod:`onchip.model` (KAN edges are
uniform B-splines with sparse k+1 coefficient updates, Liu et al. 2024,
Sec. 2.2); the HLS coding style follows Xilinx UG1399 (Vitis HLS user guide:
arbitrary-precision types, PIPELINE / ARRAY_PARTITION / INTERFACE pragmas).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

import numpy as np

from ..fixed import Fmt
from ..hw.names import DEFAULT_TOP, check_top
from ..model.basis import basis_table
from ..model.golden import check_parameters, initial_parameters, layout, update_size
from ..spec import LearnerSpec

#: Operations of the top function's ``op`` register.
OPS = {"RUN": 0, "PREDICT": 1, "READ": 2, "LOAD": 3, "RESET": 4, "RUN_KINDS": 5}
#: The static files copied into every project.
STATIC_FILES = ("onchip_fixed.h", "onchip_csim.cpp", "onchip_tb.cpp")
#: Arrays with at most this many entries are partitioned into registers.
_PARTITION_COMPLETE_MAX = 512


@dataclass(frozen=True)
class HlsProject:
    """The C++ sources and scripts of one learner.

    Attributes:
        top: name of the top function (also the stem of ``<top>.h`` / ``<top>.cpp``).
        files: file name -> text, everything :func:`write` puts in a folder.
    """

    top: str
    files: dict[str, str]

    @property
    def csim_unit(self) -> str:
        """One translation unit holding the kernels and the C-simulation program
        (the ap_types headers are parsed once: most of the compile time)."""
        return f'#include "{self.top}.cpp"\n#include "onchip_csim.cpp"\n'


def _literal(value: float) -> str:
    # repr round-trips a float64 exactly, and every value here is a dyadic
    # rational of at most 32 significant bits, so the literal is exact.
    return repr(float(value))


def _array(values, per_line: int = 8) -> str:
    items = [_literal(v) for v in values]
    lines = [", ".join(items[k : k + per_line]) for k in range(0, len(items), per_line)]
    return "{\n    " + ",\n    ".join(lines) + "\n}"


def _raw_type(fmt: Fmt) -> str:
    return f"ap_int<{fmt.width}>" if fmt.signed else f"ap_uint<{fmt.width}>"


def _bits_for(n: int) -> int:
    return max(1, int(n - 1).bit_length())


def namespace(top: str) -> str:
    """The C++ namespace of the formats, sizes and tables of the learner ``top`` (not ``top`` itself:
    that names its top function)."""
    return f"{top}_ns"


def guard(top: str) -> str:
    """The include guard of ``<top>.h``: the top as written (an upper-cased one would make
    ``qubit`` and ``QUBIT`` share it), then ``_H``, a suffix no top may end in
    (:data:`onchip.hw.names.DERIVED_SUFFIXES`)."""
    return f"{top}_H"


def binding(top: str) -> str:
    """The lines a source file of the learner ``top`` starts with (its ``.cpp`` and the test
    benches): its header, its names unqualified, its top function and reset state under the names
    the shared sources use (``ONCHIP_TOP``, ``ONCHIP_THETA_INIT``)."""
    return (f'#include "{top}.h"\n'
            f"using namespace {namespace(top)};\n"
            f"#define ONCHIP_TOP {top}\n"
            f"#define ONCHIP_THETA_INIT {top}_THETA_INIT\n")


def _header(spec: LearnerSpec, theta: np.ndarray, top: str) -> str:
    f = spec.formats
    depth = spec.effective_staleness
    n_update = update_size(spec)
    p = spec.parameter_count()
    lines = [
        f"// {top}: fixed-point online {spec.kind.upper()} learner {list(spec.widths)}, "
        f"{spec.schedule} schedule, generated by onchip from its LearnerSpec.",
        f"#ifndef {guard(top)}",
        f"#define {guard(top)}",
        "",
        '#include "onchip_fixed.h"',
        "#ifndef ONCHIP_AXIS_WORD  // one stream word for every learner's header in a file",
        "#define ONCHIP_AXIS_WORD",
        "#if __has_include(<ap_axi_sdata.h>)",
        "#include <ap_axi_sdata.h>",
        "typedef ap_axis<32, 0, 0, 0> axis_word;",
        "#else",
        "// The AXI4-Stream word of ap_axi_sdata.h, for C simulation without Vitis headers.",
        "struct axis_word {",
        "    ap_int<32> data;",
        "    ap_uint<4> keep;",
        "    ap_uint<4> strb;",
        "    ap_uint<1> last;",
        "};",
        "#endif",
        "#endif",
        '#include "hls_stream.h"',
        "",
        "// The learner's formats, sizes and tables, in a namespace of its own: the headers of two",
        f"// learners of different tops go into one file ({top}.cpp and the test benches use them unqualified).",
        f"namespace {namespace(top)} {{",
        "",
        "// Signal formats (LearnerSpec.formats).",
        f"typedef {f.input.cpp()} input_t;",
        f"typedef {f.coef.cpp()} coef_t;",
        f"typedef {f.act.cpp()} act_t;",
        f"typedef {f.y.cpp()} out_t;  // predictions and targets: the output format",
        f"typedef {f.grad.cpp()} grad_t;",
        f"typedef {f.acc.cpp()} acc_t;",
    ]
    if spec.kind == "kan":
        lines.append(f"typedef {f.basis.cpp()} basis_t;")
    lines += [
        f"typedef ap_uint<{_bits_for(p)}> addr_t;",
        f"typedef ap_uint<{_bits_for(spec.channels)}> channel_t;  // a sample's channel, ceil(log2 N_CHANNELS) bits",
        "",
        f"static const int N_IN = {spec.n_in};",
        f"static const int N_OUT = {spec.n_out};",
        f"static const int N_PARAM = {p};",
        f"static const int N_CHANNELS = {spec.channels};  // parameter banks, one per channel",
        f"static const int N_UPDATE = {n_update};",
        f"// Updates a sample does not see (pipelined schedule); 0 = sequential.",
        f"static const int STALENESS = {depth};",
        f"static const int LR_SHIFT = {spec.lr_shift};  // learning rate 2^-LR_SHIFT",
    ]
    lines += [f"static const int OP_{name} = {code};" for name, code in OPS.items()]
    if spec.kind == "kan":
        bval, bder = basis_table(spec.spline_order, spec.basis_table_bits, f.basis)
        k1 = spec.spline_order + 1
        lines += [
            f"static const int GRID_SIZE = {spec.grid_size};",
            f"static const int N_COEF = {spec.n_coef};",
            f"static const int K1 = {k1};  // active basis functions per edge (k+1)",
            f"static const int TABLE_BITS = {spec.basis_table_bits};",
            f"static const int CELL_EXP = {spec.cell_exp};  // cell width 2^CELL_EXP",
            "",
            "// Basis table: entry a holds the k+1 active B-spline values (derivatives d/dt)",
            "// at the cell position t = a / 2^TABLE_BITS.",
            f"static const basis_t BVAL[{len(bval)}][K1] = "
            + _nested(f.basis.dequantize(bval)) + ";",
            f"static const basis_t BDER[{len(bder)}][K1] = "
            + _nested(f.basis.dequantize(bder)) + ";",
        ]
    lines += [
        "",
        f"}}  // namespace {namespace(top)}",
        "",
        "// Initial parameters (coef_t), the learner's reset state; layout as onchip.model.layout"
        + ("; one row per channel." if theta.ndim == 2 else "."),
        f"#define {top}_THETA_INIT {_init(f.coef.dequantize(theta))}".replace("\n", " \\\n"),
        "",
        f"{_return_type(spec)} {top}(hls::stream<axis_word>& s_in, hls::stream<axis_word>& s_out,",
        " " * (len(_return_type(spec)) + len(top) + 2) + "ap_uint<3> op, ap_uint<32> n_samples);",
        "",
        "#endif",
        "",
    ]
    return "\n".join(lines)


def _init(theta: np.ndarray) -> str:
    """The initializer of the reset state: flat (P,), or one braced row per channel (N, P)."""
    if theta.ndim == 1:
        return _array(theta)
    return "{\n" + ",\n".join(_array(row) for row in theta) + "\n}"


def _nested(table: np.ndarray) -> str:
    rows = ["{" + ", ".join(_literal(v) for v in row) + "}" for row in table]
    return "{\n    " + ",\n    ".join(rows) + "\n}"


# -- kernels ---------------------------------------------------------------------
def _in_type(layer: int) -> str:
    return "input_t" if layer == 0 else "act_t"


def _out_type(spec: LearnerSpec, layer: int) -> str:
    """The C++ type of ``layer``'s outputs: ``out_t`` (the output format) for the last layer."""
    return "out_t" if layer == len(spec.widths) - 2 else "act_t"


def _in_fmt(spec: LearnerSpec, layer: int) -> Fmt:
    return spec.formats.input if layer == 0 else spec.formats.act


def _mlp_layers(spec: LearnerSpec) -> str:
    layers = layout(spec)
    last = len(layers) - 1
    out = []
    for l, lay in enumerate(layers):
        n_in, n_out, w0 = lay.n_in, lay.n_out, lay.offset
        b0 = w0 + n_in * n_out
        relu = l < last
        out.append(f"""
// Layer {l} forward: z[j] = act(acc(bias[j]) + sum_i acc(W[j][i] * a[i])){', then ReLU' if relu else ''}.
static void forward_{l}(const coef_t theta[N_PARAM], const {_in_type(l)} a[{n_in}], {_out_type(spec, l)} z[{n_out}]) {{
#pragma HLS INLINE
FWD{l}_J:
    for (int j = 0; j < {n_out}; j++) {{
#pragma HLS UNROLL
        acc_t s = onchip::convert<acc_t>(theta[{b0} + j]);
    FWD{l}_I:
        for (int i = 0; i < {n_in}; i++) {{
#pragma HLS UNROLL
            s += onchip::convert<acc_t>(theta[{w0} + j * {n_in} + i] * a[i]);
        }}
        {_out_type(spec, l)} v = onchip::convert<{_out_type(spec, l)}>(s);
        z[j] = {'(onchip::raw_bits(v) > 0) ? v : onchip::zero<act_t>()' if relu else 'v'};
    }}
}}

// Layer {l} backward: delta W = coef(e[j] * a[i] * 2^-s), delta bias = coef(e[j] * 2^-s){'' if l == 0 else ','}
{'' if l == 0 else '// e_prev[i] = grad(sum_j acc(W[j][i] * e[j])), 0 where the ReLU output a[i] <= 0.'}
static void backward_{l}(const coef_t theta[N_PARAM], const {_in_type(l)} a[{n_in}], const grad_t e[{n_out}],
                       {'grad_t e_prev[' + str(n_in) + '], ' if l else ''}coef_t delta[N_UPDATE]) {{
#pragma HLS INLINE
UPD{l}_J:
    for (int j = 0; j < {n_out}; j++) {{
#pragma HLS UNROLL
    UPD{l}_I:
        for (int i = 0; i < {n_in}; i++) {{
#pragma HLS UNROLL
            delta[{w0} + j * {n_in} + i] = onchip::convert<coef_t>(onchip::scale_pow2<LR_SHIFT>(e[j] * a[i]));
        }}
        delta[{b0} + j] = onchip::convert<coef_t>(onchip::scale_pow2<LR_SHIFT>(e[j]));
    }}""")
        if l:
            out.append(f"""
ERR{l}_I:
    for (int i = 0; i < {n_in}; i++) {{
#pragma HLS UNROLL
        e_prev[i] = onchip::zero<grad_t>();
        if (onchip::raw_bits(a[i]) <= 0) continue;
        acc_t s = onchip::zero<acc_t>();
    ERR{l}_J:
        for (int j = 0; j < {n_out}; j++) {{
#pragma HLS UNROLL
            s += onchip::convert<acc_t>(theta[{w0} + j * {n_in} + i] * e[j]);
        }}
        e_prev[i] = onchip::convert<grad_t>(s);
    }}""")
        out.append("\n}\n")
    return "".join(out)


def _mlp_step(spec: LearnerSpec) -> str:
    w = spec.widths
    nl = len(w) - 1
    decl = "\n".join(f"    {_out_type(spec, l - 1)} a{l}[{w[l]}];" for l in range(1, nl + 1))
    decl += "\n" + "\n".join(f"    grad_t e{l}[{w[l]}];" for l in range(1, nl + 1))
    parts = [f"    forward_{l}(theta, {'x' if l == 0 else f'a{l}'}, a{l + 1});" for l in range(nl)]
    parts.append(f"""OUT_J:
    for (int j = 0; j < N_OUT; j++) {{
#pragma HLS UNROLL
        pred[j] = a{nl}[j];
        // output error by the sample's kind (onchip.model.kernels.output_error)
        if (kind == 0) e{nl}[j] = onchip::convert<grad_t>(a{nl}[j] - y[j]);
        else if (kind == 2) e{nl}[j] = g[j];
        else e{nl}[j] = onchip::zero<grad_t>();
    }}""")
    for l in range(nl - 1, -1, -1):
        src = "x" if l == 0 else f"a{l}"
        if l:
            parts.append(f"    backward_{l}(theta, {src}, e{l + 1}, e{l}, delta);")
        else:
            parts.append(f"    backward_0(theta, x, e1, delta);")
    body = "\n".join(parts)
    return f"""
// One sample: prediction and the dense update (delta[p] for every parameter p);
// theta is only read. Mirrors onchip.model.kernels.mlp_step.
// kind: 0 TARGET (target y), 1 PREDICT (zero update), 2 ERROR (error g = dL/dy_hat).
static void learner_step(const coef_t theta[N_PARAM], const input_t x[N_IN], const out_t y[N_OUT],
                         const grad_t g[N_OUT], ap_uint<2> kind,
                         out_t pred[N_OUT], addr_t addr[N_UPDATE], coef_t delta[N_UPDATE]) {{
#pragma HLS INLINE
{decl}
{body}
ADDR_P:
    for (int p = 0; p < N_UPDATE; p++) {{
#pragma HLS UNROLL
        addr[p] = p;
    }}
}}
"""


def _kan_layers(spec: LearnerSpec) -> str:
    layers = layout(spec)
    g, t = spec.grid_size, spec.basis_table_bits
    out = []
    for l, lay in enumerate(layers):
        n_in, n_out, off = lay.n_in, lay.n_out, lay.offset
        fmt = _in_fmt(spec, l)
        pos = fmt.frac_bits + spec.cell_exp
        lo_raw = int(fmt.quantize(spec.grid_range[0]))
        span = g << pos
        vw = max(fmt.width, span.bit_length() + 1) + 2
        cb = _bits_for(g)
        out.append(f"""
// Layer {l} input: clamp u to the grid, cell c = v >> P, table address = top TABLE_BITS
// bits of the position in the cell (v = raw(u) - raw(lo), P = {pos} position bits).
static void locate_{l}(const {_in_type(l)} u[{n_in}], ap_uint<{cb}> cell[{n_in}],
                     ap_uint<TABLE_BITS> ta[{n_in}], bool clamped[{n_in}]) {{
#pragma HLS INLINE
LOC{l}_I:
    for (int i = 0; i < {n_in}; i++) {{
#pragma HLS UNROLL
        ap_int<{vw}> v = ap_int<{vw}>(onchip::raw_bits(u[i])) - ap_int<{vw}>({lo_raw});
        const ap_int<{vw}> span = {span};
        clamped[i] = (v < 0) || (v >= span);
        if (v < 0) v = 0;
        if (v >= span) v = span - 1;
        cell[i] = v >> {pos};
        ta[i] = (v >> {pos - t}).range(TABLE_BITS - 1, 0);
    }}
}}

// Layer {l} forward: out[j] = act(sum_i sum_m acc(coef[j][i][c_i + m] * BVAL[a_i][m])).
static void forward_{l}(const coef_t theta[N_PARAM], const ap_uint<{cb}> cell[{n_in}],
                      const ap_uint<TABLE_BITS> ta[{n_in}], {_out_type(spec, l)} out[{n_out}]) {{
#pragma HLS INLINE
FWD{l}_J:
    for (int j = 0; j < {n_out}; j++) {{
#pragma HLS UNROLL
        acc_t s = onchip::zero<acc_t>();
    FWD{l}_I:
        for (int i = 0; i < {n_in}; i++) {{
#pragma HLS UNROLL
            const int base = {off} + (j * {n_in} + i) * N_COEF + cell[i];
        FWD{l}_M:
            for (int m = 0; m < K1; m++) {{
#pragma HLS UNROLL
                s += onchip::convert<acc_t>(theta[base + m] * BVAL[ta[i]][m]);
            }}
        }}
        out[j] = onchip::convert<{_out_type(spec, l)}>(s);
    }}
}}

// Layer {l} backward: the sparse update delta = coef(e[j] * BVAL[a_i][m] * 2^-s) of the
// k+1 active coefficients per edge, written from slot {{n}} on{'' if l == 0 else ';'}
{'' if l == 0 else '''// dphi = grad(acc(sum_m coef * BDER) * 2^-CELL_EXP), e_prev[i] = grad(sum_j acc(e[j] * dphi)),
// 0 where u[i] was clamped.'''}
static void backward_{l}(const coef_t theta[N_PARAM], const ap_uint<{cb}> cell[{n_in}],
                       const ap_uint<TABLE_BITS> ta[{n_in}], const bool clamped[{n_in}],
                       const grad_t e[{n_out}], {'grad_t e_prev[' + str(n_in) + '], ' if l else ''}int n0,
                       addr_t addr[N_UPDATE], coef_t delta[N_UPDATE]) {{
#pragma HLS INLINE
UPD{l}_J:
    for (int j = 0; j < {n_out}; j++) {{
#pragma HLS UNROLL
    UPD{l}_I:
        for (int i = 0; i < {n_in}; i++) {{
#pragma HLS UNROLL
            const int base = {off} + (j * {n_in} + i) * N_COEF + cell[i];
        UPD{l}_M:
            for (int m = 0; m < K1; m++) {{
#pragma HLS UNROLL
                const int n = n0 + (j * {n_in} + i) * K1 + m;
                addr[n] = base + m;
                delta[n] = onchip::convert<coef_t>(onchip::scale_pow2<LR_SHIFT>(e[j] * BVAL[ta[i]][m]));
            }}
        }}
    }}""")
        if l:
            out.append(f"""
ERR{l}_I:
    for (int i = 0; i < {n_in}; i++) {{
#pragma HLS UNROLL
        e_prev[i] = onchip::zero<grad_t>();
        if (clamped[i]) continue;
        acc_t s = onchip::zero<acc_t>();
    ERR{l}_J:
        for (int j = 0; j < {n_out}; j++) {{
#pragma HLS UNROLL
            const int base = {off} + (j * {n_in} + i) * N_COEF + cell[i];
            acc_t sd = onchip::zero<acc_t>();
        ERR{l}_M:
            for (int m = 0; m < K1; m++) {{
#pragma HLS UNROLL
                sd += onchip::convert<acc_t>(theta[base + m] * BDER[ta[i]][m]);
            }}
            grad_t dphi = onchip::convert<grad_t>(onchip::scale_pow2<CELL_EXP>(sd));
            s += onchip::convert<acc_t>(e[j] * dphi);
        }}
        e_prev[i] = onchip::convert<grad_t>(s);
    }}""")
        out.append("\n}\n")
    return "".join(out)


def _kan_step(spec: LearnerSpec) -> str:
    w = spec.widths
    nl = len(w) - 1
    cb = _bits_for(spec.grid_size)
    decl = []
    for l in range(nl):
        decl += [
            f"    ap_uint<{cb}> cell{l}[{w[l]}];",
            f"    ap_uint<TABLE_BITS> ta{l}[{w[l]}];",
            f"    bool clamped{l}[{w[l]}];",
        ]
    decl += [f"    {_out_type(spec, l - 1)} a{l}[{w[l]}];" for l in range(1, nl + 1)]
    decl += [f"    grad_t e{l}[{w[l]}];" for l in range(1, nl + 1)]
    parts = []
    for l in range(nl):
        src = "x" if l == 0 else f"a{l}"
        parts.append(f"    locate_{l}({src}, cell{l}, ta{l}, clamped{l});")
        parts.append(f"    forward_{l}(theta, cell{l}, ta{l}, a{l + 1});")
    parts.append(f"""OUT_J:
    for (int j = 0; j < N_OUT; j++) {{
#pragma HLS UNROLL
        pred[j] = a{nl}[j];
        // output error by the sample's kind (onchip.model.kernels.output_error)
        if (kind == 0) e{nl}[j] = onchip::convert<grad_t>(a{nl}[j] - y[j]);
        else if (kind == 2) e{nl}[j] = g[j];
        else e{nl}[j] = onchip::zero<grad_t>();
    }}""")
    n0 = 0
    k1 = spec.spline_order + 1
    for l in range(nl - 1, -1, -1):
        extra = f"e{l}, " if l else ""
        parts.append(
            f"    backward_{l}(theta, cell{l}, ta{l}, clamped{l}, e{l + 1}, {extra}{n0}, addr, delta);"
        )
        n0 += w[l] * w[l + 1] * k1
    return f"""
// One sample: prediction and the sparse update (addr, delta), last layer first;
// theta is only read. Mirrors onchip.model.kernels.kan_step.
// kind: 0 TARGET (target y), 1 PREDICT (zero update), 2 ERROR (error g = dL/dy_hat).
static void learner_step(const coef_t theta[N_PARAM], const input_t x[N_IN], const out_t y[N_OUT],
                         const grad_t g[N_OUT], ap_uint<2> kind,
                         out_t pred[N_OUT], addr_t addr[N_UPDATE], coef_t delta[N_UPDATE]) {{
#pragma HLS INLINE
{chr(10).join(decl)}
{chr(10).join(parts)}
}}
"""


def _partition(var: str, size: int, dim: int = 1) -> str:
    if size <= _PARTITION_COMPLETE_MAX:
        return f"#pragma HLS ARRAY_PARTITION variable={var} type=complete dim={dim}"
    return f"#pragma HLS ARRAY_PARTITION variable={var} type=cyclic factor=8 dim={dim}"


def _return_type(spec: LearnerSpec) -> str:
    """The top function's return: with channels, the sticky ``channel_error`` (ap_ctrl's return
    register); a single-channel learner returns nothing."""
    return "ap_uint<1>" if spec.channels > 1 else "void"


def _top(spec: LearnerSpec) -> str:
    depth = spec.effective_staleness  # 0 with channels: each channel is sequential
    p, m = spec.parameter_count(), update_size(spec)
    banks = spec.channels > 1
    # the bank a sample and the parameter port use: theta itself, or theta[ch] of its channel
    bank = "theta[ch]" if banks else "theta"
    queue_decl = ""
    queue_helpers = ""
    if depth:
        queue_decl = f"""    // Pending updates of the pipelined schedule: a FIFO of STALENESS samples.
    static addr_t q_addr[STALENESS][N_UPDATE];
    static coef_t q_delta[STALENESS][N_UPDATE];
    static ap_uint<{_bits_for(depth + 1)}> q_head = 0, q_count = 0;
{_partition('q_addr', m, 2)}
{_partition('q_delta', m, 2)}
"""
        queue_helpers = """
// Commit the oldest pending update (the FIFO is not empty).
#define ONCHIP_COMMIT_OLDEST()                                    \\
    do {                                                          \\
        commit(theta, q_addr[q_head], q_delta[q_head]);           \\
        q_head = (q_head == STALENESS - 1) ? 0 : int(q_head + 1); \\
        q_count = q_count - 1;                                    \\
    } while (0)
"""
    flush = (
        """FLUSH:
        while (q_count > 0) {
#pragma HLS LOOP_TRIPCOUNT min=0 max=STALENESS
            ONCHIP_COMMIT_OLDEST();
        }"""
        if depth
        else "// Sequential schedule: nothing is ever pending."
    )
    if depth:
        learn = """            learner_step(theta, x, y, g, kind, pred, addr, delta);
            if (op != OP_PREDICT) {
                // Sample n has read theta: the update of sample n - D lands now
                // (read-before-write), before sample n + 1 reads.
                if (q_count == STALENESS) ONCHIP_COMMIT_OLDEST();
                int tail = int(q_head) + int(q_count);
                if (tail >= STALENESS) tail -= STALENESS;
            PUSH_P:
                for (int q = 0; q < N_UPDATE; q++) {
#pragma HLS UNROLL
                    q_addr[tail][q] = addr[q];
                    q_delta[tail][q] = delta[q];
                }
                q_count = q_count + 1;
            }"""
    else:
        learn = f"""            learner_step({bank}, x, y, g, kind, pred, addr, delta);
            if (op != OP_PREDICT) commit({bank}, addr, delta);"""
    reset_queue = "        q_head = 0;\n        q_count = 0;\n" if depth else ""
    if banks:
        state = f"""    static coef_t theta[N_CHANNELS][N_PARAM] = ONCHIP_THETA_INIT;
    // sticky: a sample or a parameter call named a channel >= N_CHANNELS since the last OP_RESET
    static ap_uint<1> channel_error = 0;
{_partition('theta', p, 2)}"""
        reset = """        static const coef_t init[N_CHANNELS][N_PARAM] = ONCHIP_THETA_INIT;
    RESET_C:
        for (int c = 0; c < N_CHANNELS; c++)
        RESET_P:
            for (int q = 0; q < N_PARAM; q++) theta[c][q] = init[c][q];
        channel_error = 0;"""
        # a channel >= N names no bank: handled as the RTL core handles it (docs/spec.md, Channels)
        port_channel = """
        if (n_samples >= N_CHANNELS) {  // no such bank: one answer per call, no bank touched
            channel_error = 1;
        PORT_BAD_P:
            for (int q = 0; q < N_PARAM; q++) {
#pragma HLS PIPELINE II=1
                if (op == OP_LOAD) {
                    s_in.read();  // taken and dropped, so that the next call starts on its own words
                } else {
                    axis_word w;  // answered 0, as many words as a read of a bank
                    w.data = 0;
                    w.keep = -1;
                    w.strb = -1;
                    w.last = (q == N_PARAM - 1);
                    s_out.write(w);
                }
            }
            return channel_error;
        }
        const channel_t ch = n_samples;"""
        sample_channel = """
        // the channel word, after the other fields: the bank this sample uses; a sample naming a
        // channel >= N_CHANNELS is taken and dropped (no prediction out, no update)
        ap_uint<32> cw = s_in.read().data;
        const bool dropped = cw >= N_CHANNELS;
        if (dropped) channel_error = 1;
        const channel_t ch = dropped ? channel_t(0) : channel_t(cw);
        if (dropped) continue;"""
        port_doc = """//   OP_READ    the N_PARAM parameter words of channel n_samples out (TLAST on the last).
//   OP_LOAD    N_PARAM parameter words in, into channel n_samples's bank (the parameter port).
//   OP_RESET   every channel back to its initial parameters.
//   Every sample of OP_RUN / OP_RUN_KINDS / OP_PREDICT ends with one more word, its channel
//   (0 to N_CHANNELS - 1): the bank it is predicted and learned with.
//   A sample naming a channel >= N_CHANNELS is dropped (no prediction words, no update); an
//   OP_READ naming one answers N_PARAM zero words, an OP_LOAD takes and drops its words. Either
//   sets channel_error, returned by every call until OP_RESET."""
    else:
        state = f"""    static coef_t theta[N_PARAM] = ONCHIP_THETA_INIT;
{_partition('theta', p)}"""
        reset = """        static const coef_t init[N_PARAM] = ONCHIP_THETA_INIT;
    RESET_P:
        for (int q = 0; q < N_PARAM; q++) theta[q] = init[q];"""
        port_channel = sample_channel = ""
        port_doc = """//   OP_READ    flush, then the N_PARAM parameter words out (TLAST on the last).
//   OP_LOAD    flush, then N_PARAM parameter words in (the parameter port).
//   OP_RESET   back to the initial parameters, nothing pending."""
    ret = "return channel_error;" if banks else "return;"
    final_ret = "\n    return channel_error;" if banks else ""
    return f"""
// theta[addr[n]] = overflow(theta[addr[n]] - delta[n]) in coef_t (same binary point:
// only the overflow mode acts), in order (onchip.model.stream.commit).
static void commit(coef_t theta[N_PARAM], const addr_t addr[N_UPDATE], const coef_t delta[N_UPDATE]) {{
#pragma HLS INLINE
COMMIT_N:
    for (int n = 0; n < N_UPDATE; n++) {{
#pragma HLS UNROLL
        theta[addr[n]] = onchip::convert<coef_t>(theta[addr[n]] - delta[n]);
    }}
}}
{queue_helpers}
// Top function. Every call runs one operation `op` on the persistent learner state:
//   OP_RUN     n_samples x (N_IN input words, N_OUT target words) in -> N_OUT prediction
//              words and one decision word out per sample; test-then-train (predict, then
//              learn), every sample TARGET.
//   OP_RUN_KINDS n_samples x (N_IN input words, one kind word, N_OUT y words) in -> as
//              OP_RUN; kind 0 TARGET (y: targets, out_t), 1 PREDICT (y ignored, a zero
//              update in its slot of the pipelined window), 2 ERROR (y: dL/dy_hat, grad_t).
//   OP_PREDICT n_samples x N_IN input words in -> as OP_RUN; no learning, nothing pending.
//   The decision word: the index of the largest prediction, the lowest on a tie (one
//   output: 1 when the prediction is >= 0), onchip.model.decision.
{port_doc}
// A word carries the raw two's-complement integer of its value (value = raw * 2^-F).
{_return_type(spec)} ONCHIP_TOP(hls::stream<axis_word>& s_in, hls::stream<axis_word>& s_out,
{" " * (len(_return_type(spec)) + 12)}ap_uint<3> op, ap_uint<32> n_samples) {{
#pragma HLS INTERFACE mode=axis port=s_in
#pragma HLS INTERFACE mode=axis port=s_out
#pragma HLS INTERFACE mode=s_axilite port=op
#pragma HLS INTERFACE mode=s_axilite port=n_samples
#pragma HLS INTERFACE mode=s_axilite port=return
{state}
{queue_decl}
    if (op == OP_RESET) {{
{reset}
{reset_queue}        {ret}
    }}
    if (op == OP_READ || op == OP_LOAD) {{
        {flush}{port_channel}
    PARAM_P:
        for (int q = 0; q < N_PARAM; q++) {{
#pragma HLS PIPELINE II=1
            if (op == OP_LOAD) {{
                {bank}[q] = onchip::from_word<coef_t>(s_in.read().data);
            }} else {{
                axis_word w;
                w.data = onchip::to_word({bank}[q]);
                w.keep = -1;
                w.strb = -1;
                w.last = (q == N_PARAM - 1);
                s_out.write(w);
            }}
        }}
        {ret}
    }}
    if (op != OP_RUN && op != OP_RUN_KINDS && op != OP_PREDICT) {ret}
SAMPLES:
    for (ap_uint<32> n = 0; n < n_samples; n++) {{
#pragma HLS LOOP_TRIPCOUNT min=1 max=1024
#pragma HLS PIPELINE
        input_t x[N_IN];
        out_t y[N_OUT];
        grad_t g[N_OUT];
        out_t pred[N_OUT];
        addr_t addr[N_UPDATE];
        coef_t delta[N_UPDATE];
{_partition('addr', m)}
{_partition('delta', m)}
    READ_X:
        for (int i = 0; i < N_IN; i++) x[i] = onchip::from_word<input_t>(s_in.read().data);
        ap_uint<2> kind = (op == OP_PREDICT) ? 1 : 0;
        if (op == OP_RUN_KINDS) kind = s_in.read().data.range(1, 0);
    READ_Y:
        for (int j = 0; j < N_OUT; j++) {{
            // one word holds a target (out_t) or an error (grad_t): the kind says which is used
            ap_int<32> word = (op == OP_PREDICT) ? ap_int<32>(0) : s_in.read().data;
            y[j] = onchip::from_word<out_t>(word);
            g[j] = onchip::from_word<grad_t>(word);
        }}{sample_channel}
        {{
{learn}
        }}
        ap_uint<32> decision = decide(pred);
    WRITE_P:
        for (int j = 0; j <= N_OUT; j++) {{
            axis_word w;
            w.data = (j < N_OUT) ? onchip::to_word(pred[j]) : ap_int<32>(decision);
            w.keep = -1;
            w.strb = -1;
            w.last = (n == n_samples - 1) && (j == N_OUT);
            s_out.write(w);
        }}
    }}{final_ret}
}}
"""


def _decision(spec: LearnerSpec) -> str:
    """C++ of ``decide(pred)``, the decision of a prediction (:func:`onchip.model.decision.decisions`)."""
    if spec.n_out == 1:
        body = "    return (pred[0] >= 0) ? 1 : 0;  // one output: its sign"
    else:
        body = """    int best = 0;
DECIDE_J:
    for (int j = 1; j < N_OUT; j++) {
#pragma HLS UNROLL
        if (pred[j] > pred[best]) best = j;  // strictly greater: the lowest index on a tie
    }
    return best;"""
    return f"""
// The decision of a prediction: the index of the largest output, the lowest on a tie.
static ap_uint<32> decide(const out_t pred[N_OUT]) {{
#pragma HLS INLINE
{body}
}}
"""


def _source(spec: LearnerSpec, top: str) -> str:
    kernels = _kan_layers(spec) + _kan_step(spec) if spec.kind == "kan" else _mlp_layers(spec) + _mlp_step(spec)
    return (
        f"// {top}: the learner's kernels and top function, generated by onchip.\n"
        "// Each assignment to a typed signal is one rounding point of the golden model\n"
        "// (onchip.model.kernels): ap_fixed rounds with the target's mode, then saturates/wraps.\n"
        + binding(top) + kernels + _decision(spec) + _top(spec)
    )


def _tcl(top: str, part: str, clock_ns: float) -> str:
    return f"""# Vitis HLS project of the onchip learner `{top}`.
# Usage: vitis_hls -f run_hls.tcl          (all steps)
#        vitis_hls -f run_hls.tcl -tclargs "csim csynth"
# The test bench replays tb_data/stimulus.dat and checks every prediction and the final
# parameters against tb_data/expected.dat, written from the onchip golden model.
set part "{part}"
set clock_ns {clock_ns}
set steps {{csim csynth cosim export}}
if {{[info exists ::argv] && [llength $::argv] > 0}} {{ set steps [lindex $::argv 0] }}

open_project -reset {top}_prj
set_top {top}
add_files {top}.cpp -cflags "-std=c++14 -I."
add_files -tb onchip_tb.cpp -cflags "-std=c++14 -I."
add_files -tb tb_data
open_solution -reset solution1 -flow_target vivado
set_part $part
create_clock -period $clock_ns -name default

if {{[lsearch $steps csim] >= 0}}   {{ csim_design }}
if {{[lsearch $steps csynth] >= 0}} {{ csynth_design }}
if {{[lsearch $steps cosim] >= 0}}  {{ cosim_design }}
if {{[lsearch $steps export] >= 0}} {{ export_design -format ip_catalog }}
exit
"""


def emit(
    spec: LearnerSpec,
    *,
    theta: np.ndarray | None = None,
    top: str = DEFAULT_TOP,
    part: str = "xcu250-figd2104-2L-e",
    clock_ns: float = 5.0,
) -> HlsProject:
    """The HLS C++ project of ``spec``.

    Args:
        spec: the learner.
        theta: initial raw parameters (flat int64 (P,), ``coef`` format; with channels > 1
            (N, P) or (P,) for every channel), compiled in as the reset state; default
            :func:`onchip.model.golden.initial_parameters` (in every channel).
        top: name of the top function (:func:`onchip.hw.names.check_top`).
        part: FPGA part of the Vitis script.
        clock_ns: clock period of the Vitis script, ns.

    Returns:
        :class:`HlsProject` (no test-bench data; :func:`write` adds it).

    Raises:
        ValueError: ``top`` is not a name :func:`onchip.hw.names.check_top` accepts, ``part`` not shaped like a Xilinx part name
            (:func:`onchip.flow.vivado.check_part`), ``clock_ns`` is not positive, or
            ``theta`` has the wrong shape or values outside the ``coef`` format.
    """
    check_top(top)
    if not (isinstance(clock_ns, (int, float)) and clock_ns > 0):
        raise ValueError(f"clock_ns must be a positive number of nanoseconds, got {clock_ns!r}")
    from ..flow.vivado import check_part

    check_part(part)  # it goes into the Tcl script as written
    theta = checked_theta(spec, theta)
    files = {
        f"{top}.h": _header(spec, theta, top),
        f"{top}.cpp": _source(spec, top),
        "run_hls.tcl": _tcl(top, part, clock_ns),
    }
    for name in STATIC_FILES:
        text = resources.files(__package__).joinpath(name).read_text()
        files[name] = text.replace('#include "onchip_top.h"\n', binding(top))
    return HlsProject(top, files)


def checked_theta(spec: LearnerSpec, theta) -> np.ndarray:
    """``theta`` as int64 (P,) ((N, P) with channels > 1) after checking shape and range
    (:func:`onchip.model.golden.check_parameters`); the spec's initial parameters if None.

    Raises:
        ValueError: wrong shape, non-integer dtype, or raw values outside the ``coef`` format.
    """
    return check_parameters(spec, initial_parameters(spec) if theta is None else theta)


def write(project: HlsProject, folder, *, stimulus=None, expected=None) -> None:
    """Write the project's files into ``folder`` (which must exist), and the test-bench data.

    Args:
        project: from :func:`emit`.
        folder: destination folder.
        stimulus: optional ``(x_raw (N, n_in), y_raw (N, n_out))`` written to
            ``tb_data/stimulus.dat``; with channels > 1, ``(x_raw, y_raw, channel (N,))``, the
            channel written after each sample's other words.
        expected: optional ``(predictions (N, n_out), theta (P,) or (channels, P))`` raw, written to
            ``tb_data/expected.dat`` with each sample's decision after its predictions (what
            the test bench checks against).
    """
    from pathlib import Path

    folder = Path(folder)
    for name, text in project.files.items():
        (folder / name).write_text(text)
    if stimulus is not None:
        data = folder / "tb_data"
        data.mkdir(exist_ok=True)
        rows = np.hstack([np.asarray(a, np.int64).reshape(len(stimulus[0]), -1) for a in stimulus])
        body = "\n".join(" ".join(str(int(v)) for v in row) for row in rows)
        (data / "stimulus.dat").write_text(f"{len(rows)}\n{body}\n")
        if expected is not None:
            from ..model.decision import decisions

            preds, theta = (np.asarray(a, np.int64) for a in expected)
            rows = np.hstack([preds, decisions(preds)[:, None]]) if len(preds) else preds
            lines = [" ".join(str(int(v)) for v in row) for row in rows]
            lines += [" ".join(str(int(v)) for v in bank) for bank in theta.reshape(-1, theta.shape[-1])]
            (data / "expected.dat").write_text("\n".join(lines) + "\n")
