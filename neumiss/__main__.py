"""``python -m neumiss`` runs the ``neumiss`` command line."""

import sys

from .cli import main

sys.exit(main())
