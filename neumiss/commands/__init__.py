"""The ``neumiss export`` and ``neumiss score`` commands (``neumiss.cli`` dispatches to them).

Each module defines ``configure_parser(parser)`` and ``run(args)``. The top layer: it may
import any subpackage.
"""


__all__ = [
]
