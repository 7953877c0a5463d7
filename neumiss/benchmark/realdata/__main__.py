"""``python -m neumiss.benchmark.realdata [CACHE_DIR]``: export the suite's data sets with R."""

import sys

from ._cache import DEFAULT_CACHE, export_datasets
from ._tasks import TASKS


def main(argv: list[str]) -> int:
    """Export every task's data set into ``argv[0]`` (default: the default cache)."""
    if len(argv) > 1 or argv[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    cache = argv[0] if argv else DEFAULT_CACHE
    try:
        export_datasets(TASKS.values(), cache)
    except RuntimeError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
