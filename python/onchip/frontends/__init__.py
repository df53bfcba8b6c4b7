"""Front ends: trained models -> onchip learners (a LearnerSpec plus raw initial parameters).

* :mod:`onchip.frontends.brevitas`: a fixed-point brevitas MLP, mapped exactly;
* :mod:`onchip.frontends.qkeras`: a QKeras QDense/QActivation MLP, mapped exactly;
* :mod:`onchip.frontends.pykan`: a pykan KAN, projected onto onchip's uniform grid;
* :mod:`onchip.frontends.exact_mlp`: the MLP spec both exact front ends build;
* :mod:`onchip.frontends.saved`: saved models on disk -> an import folder (``onchip import``);
* :mod:`onchip.frontends.hls4ml_bridge`: the same networks through hls4ml (inference only, C
  simulation), to compare with ours.
"""
