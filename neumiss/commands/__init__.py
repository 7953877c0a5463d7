"""The ``neumiss export`` and ``neumiss score`` commands (``neumiss.cli`` dispatches to them).

Each private module defines ``configure_parser(parser)`` and ``run(args)``; ``neumiss.cli``
imports a command's module by name, only when that command runs, so that ``neumiss --help``
loads neither torch nor ONNX Runtime. Nothing is public here. The top layer: it may import
any subpackage.
"""

__all__: list[str] = []
