"""The basis table's RAM kind: at timing = "fast" the B-spline unit's table is logic, never a block
RAM (a DP16KD's clock-to-output delay before the bank-order multiplexer limited kan-paper's fmax,
sweeps/timing); compact keeps the synthesis tool's choice (a block RAM for kan-paper's table)."""

from onchip.flow import yosys
from onchip.hw import generate
from onchip.spec import PRESETS


def test_fast_builds_the_basis_table_from_logic():
    spec = PRESETS["kan-paper"]  # one edge: the basis table is its only memory above the banks' LUTRAM
    fast = generate(spec.replace(timing="fast"), axis=False, dsp="ecp5")
    compact = generate(spec.replace(timing="compact"), axis=False)
    assert fast.verilog.count('rom_style = "logic"') == 1 and 'rom_style = "logic"' not in compact.verilog
    got = {name: yosys.synthesize(d.verilog, d.top, "ecp5") for name, d in (("fast", fast), ("compact", compact))}
    assert got["compact"]["bram"] >= 1  # left to Yosys, the table is a block RAM
    assert got["fast"]["bram"] == 0
