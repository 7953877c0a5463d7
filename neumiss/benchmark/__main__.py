"""``python -m neumiss.benchmark``: the ``neumiss benchmark`` command."""

import sys

from neumiss.benchmark._cli import main

if __name__ == "__main__":
    sys.exit(main())
