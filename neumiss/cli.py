"""The ``neumiss`` command line: ``neumiss <command> [options]``.

Each command lives in its own module, which defines ``configure_parser(parser)``
(adds the command's arguments to an ``argparse`` parser) and ``run(args) -> int``
(the exit status). Modules are imported only when their command runs, so
``neumiss --help`` stays fast.

Every failure prints one line on standard error and exits with a non-zero
status: 2 for bad options, 1 for other errors, 130 when interrupted;
``--debug`` shows the full traceback instead.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys

from ._version import __version__

#: command name -> (module implementing it, one-line help)
COMMANDS = {
    "benchmark": ("neumiss.benchmark._cli",
                  "run the paper's grid, the real-data suite or the interval suite"),
    "export": ("neumiss.commands._export", "export a model saved by save() to ONNX"),
    "score": ("neumiss.commands._score",
              "score a CSV or Parquet file in row batches (ONNX Runtime)"),
}

_DEBUG_HELP = "on an error, show the full Python traceback instead of one line"


def plain_text(text: str) -> str:
    """``text`` without reST markup: ``literal`` becomes literal, :role:`x` becomes x."""
    text = re.sub(r":[a-z]+:`~?([^`]*)`", r"\1", text)
    return re.sub(r"``([^`]*)``", r"\1", text)


def one_line(error: BaseException) -> str:
    """An exception as one line: its message (or class name), lines joined."""
    message = " ".join(line.strip() for line in str(error).splitlines() if line.strip())
    return message or type(error).__name__


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (no usage block), exit status 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (--help lists the options)\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The top-level parser; only ``command``'s module is imported to fill its options."""
    parser = _Parser(prog="neumiss", description=plain_text(__doc__.splitlines()[0]))
    parser.add_argument("--version", action="version", version=f"neumiss {__version__}")
    parser.add_argument("--debug", action="store_true", help=_DEBUG_HELP)
    subparsers = parser.add_subparsers(dest="command", metavar="command")
    for name, (module_name, help_text) in COMMANDS.items():
        sub = subparsers.add_parser(name, help=help_text, description=help_text)
        # Also after the command; SUPPRESS keeps a --debug given before it.
        sub.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                         help=_DEBUG_HELP)
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
    try:
        module = importlib.import_module(COMMANDS[args.command][0])
        return int(module.run(args) or 0)
    except KeyboardInterrupt:
        if args.debug:
            raise
        print(f"neumiss {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader of our output went away (e.g. `| head`)
        return 1
    except Exception as error:
        if args.debug:
            raise
        print(
            f"neumiss {args.command}: error: {one_line(error)} "
            f"({type(error).__name__}; --debug shows the traceback)",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
