"""Software baselines of the seed methods (one module or sub-package each)."""
