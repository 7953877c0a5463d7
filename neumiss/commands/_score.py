"""``neumiss score MODEL INPUT OUTPUT``: predictions for a CSV or Parquet file, in row batches."""

from __future__ import annotations

import sys

from ..checks import AnyOf, Integer, NoneValue, check_params


def configure_parser(parser) -> None:
    """Arguments of ``neumiss score``."""
    parser.add_argument("model", help="ONNX file (neumiss export), or a model file by save()")
    parser.add_argument("input", help="table to score: .csv or .parquet")
    parser.add_argument("output", help="predictions to write: .csv or .parquet ('-': CSV to "
                                       "standard output)")
    parser.add_argument("--keep", action="append", default=[], metavar="COLUMN",
                        help="copy this input column into the output, before the predictions "
                             "(e.g. an id); repeatable")
    parser.add_argument("--header", choices=("auto", "yes", "no"), default="auto",
                        help="CSV input: whether the first line holds column names (default: "
                             "when it spells the model's names, or holds no number)")
    parser.add_argument("--batch-rows", type=int, default=None,
                        help="rows per batch of a Parquet input (default 65536)")
    parser.add_argument("--threads", type=int, default=None,
                        help="batches scored at once, each by one ONNX Runtime thread "
                             "(default: all cores)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar and no summary")


def run(args) -> int:
    """Score; notes and the summary go to standard error. Exit status 0 on success."""
    from ..scoring import BATCH_ROWS, score_file  # onnxruntime and pyarrow: only when scoring

    batch_rows = BATCH_ROWS if args.batch_rows is None else args.batch_rows
    check_params("neumiss score", {"batch_rows": batch_rows, "threads": args.threads},
                 {"batch_rows": Integer(1), "threads": AnyOf(NoneValue(), Integer(1))})

    def note(message: str) -> None:
        print(f"neumiss score: note: {message}", file=sys.stderr)

    done = score_file(args.model, args.input, args.output, keep=args.keep, header=args.header,
                      batch_rows=batch_rows, threads=args.threads,
                      progress=not args.quiet and sys.stderr.isatty(), note=note)
    if not args.quiet:
        # A rate over less than a batch would measure the start (loading the model), not
        # the scoring: "(0 rows/s)" for two rows.
        rate = (f" ({done.rows / done.seconds:,.0f} rows/s)"
                if done.rows >= batch_rows and done.seconds > 0 else "")
        print(f"neumiss score: {done.rows:,} rows scored in {done.seconds:.2f} s{rate} -> "
              f"{args.output}", file=sys.stderr)
    return 0
