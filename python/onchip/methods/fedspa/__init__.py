"""FedSPA: federated semantic-visual prototype alignment, with its baselines, on rendered characters.

Clients adapt a training-free cache classifier (Tip-Adapter-F style) on frozen vision
features by training only its class prototypes; the server learns global semantic prototypes,
initialised from text features, by InfoNCE alignment to the uploaded prototypes plus a term
that keeps them near the text; optionally, clients whose prototypes disagree with the global ones
fall back to the text features (a rule the public code never runs). Public code:
eejiarong/FedSPA-main (``utils/client.py``, ``utils/server.py``).
Here the vision-language model is a tiny CLIP trained in the project: a CNN on 16x16 glyphs
mapped into the frozen MiniLM sentence space. See ``seeds/fedspa.md``.

Modules: :mod:`.data` (glyph rendering, handwriting, Dirichlet label skew), :mod:`.encoder`
(text features, the tiny CLIP), :mod:`.federated` (client, server, fallback, baselines),
:mod:`.experiment` (the run).
"""

# the names live here, free of torch, so the command line can offer them without loading it
#: arms: FedSPA (fallback rule off, as the public code runs), FedSPA with the fallback rule at a quantile
#: threshold, and the baselines (zero-shot, local-only adapter, FedAvg of prototypes, FedCoOp-like prompts)
METHODS = ("fedspa", "fedspa_fallback", "zeroshot", "local", "fedavg", "fedcoop")
#: 36 classes: digits and upper-case letters
CLASSES = tuple("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ")
#: client domains: matplotlib fonts never seen in pre-training, and MNIST handwriting (digits only)
CLIENT_DOMAINS = ("DejaVuSerif", "DejaVuSerif-Italic", "DejaVuSansMono", "STIXGeneral", "STIXGeneralItalic",
                  "cmr10", "cmss10", "cmtt10", "mnist", "mnist")
#: the tiny CLIP's pre-training domain
PRETRAIN_DOMAINS = ("DejaVuSans", "DejaVuSans-Bold")
