"""The ``neumiss`` command line: ``neumiss <command> [options]``.

Each command lives in its own module, which defines ``configure_parser(parser)``
(adds the command's arguments to an ``argparse`` parser) and ``run(args) -> int``
(the exit status). Modules are imported only when their command runs, so
``neumiss --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from ._version import __version__

#: command name -> (module implementing it, one-line help)
COMMANDS = {
    "benchmark": ("neumiss.benchmark.cli", "run the paper's benchmark grid (or a subset)"),
    "export": ("neumiss.export_command", "export a model saved by save() to ONNX"),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The top-level parser; only ``command``'s module is imported to fill its options."""
    parser = argparse.ArgumentParser(prog="neumiss", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"neumiss {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="command")
    for name, (module_name, help_text) in COMMANDS.items():
        sub = subparsers.add_parser(name, help=help_text, description=help_text)
        if name == command:
            importlib.import_module(module_name).configure_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``neumiss`` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if a in COMMANDS), None)
    args = build_parser(command).parse_args(argv)
    if args.command is None:
        build_parser().print_help()
        return 2
    module = importlib.import_module(COMMANDS[args.command][0])
    return int(module.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
