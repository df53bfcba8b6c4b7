"""onchip: fixed-point online learners (KAN, MLP) as verified FPGA hardware."""

__version__ = "0.1.0"
