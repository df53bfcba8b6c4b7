"""Machine unlearning in quantized (brevitas, power-of-two scaled) MLPs.

Orthogonal Entropy Unlearning (OEU; Zhang, Tong, Dong, Xu, Wang, Yuan,
"Forget by Uncertainty: Orthogonal Entropy Unlearning for Quantized Neural
Networks", ICML 2026, arXiv:2602.00567) and the usual baselines, in one harness:

- :mod:`.data`     sklearn data sets, train/test split, forget requests
- :mod:`.models`   brevitas QAT MLP at 8/4/2 bits and its integer export
- :mod:`.methods`  OEU, OEU without projection, retrain, fine-tune,
                   gradient ascent, random relabelling
- :mod:`.metrics`  accuracies, membership-inference attack, gap to retrain
- :mod:`.hardware` the unlearned network on the golden model, HLS C
                   simulation and RTL, compared with brevitas sample for sample
"""
