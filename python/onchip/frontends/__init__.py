"""Front ends: trained quantized models -> onchip learners.

* :mod:`onchip.frontends.brevitas`: a fixed-point brevitas MLP -> MLP LearnerSpec + raw
  parameters for the golden model, the RTL parameter port and the HLS backend;
* :mod:`onchip.frontends.hls4ml_bridge`: the same network through QONNX and hls4ml
  (inference only, C simulation), to compare with ours.
"""
