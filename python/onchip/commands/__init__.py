"""Sub-commands of the ``onchip`` CLI, one module each.

Each module defines ``add_parser(subparsers)``, which registers its
sub-command and sets ``func=run``, and ``run(args) -> int``. Heavy imports
belong inside ``run`` so that ``onchip --help`` stays fast. Modules here are
discovered automatically by :mod:`onchip.cli`.
"""
