"""A categorical column of many categories: target statistics against the alternatives.

    python benchmarks/high_cardinality.py                   # 5,000 rows, 1,000 postcodes
    python benchmarks/high_cardinality.py --rows 20000 --categories 5000 --folds 5

Simulates a table of ``--rows`` rows: a postcode of ``--categories`` categories drawn with
Zipf-like frequencies (a few frequent, most rare), each with a random effect on the
target, four correlated numeric columns (20% missing completely at random) and 10% of
the postcodes missing. The regression target is the postcode's effect plus a linear
function of the numbers plus noise; the binary one is its sign. Cross-validated (the same
folds for every method, one thread each), it fits

* ``neumiss``: the defaults (the postcode encoded by cross-fitted target statistics);
* ``neumiss_top99``: the defaults on the postcode cut to its 99 most frequent categories
  and ``other`` (what the encoder did before, and what a user would do by hand);
* ``neumiss_dropped``: the defaults without the postcode;
* ``catboost`` (native categories: ordered target statistics) and ``lightgbm`` (native
  categories), when installed (``pip install 'neumiss[anchors]'``);

and prints mean ± standard deviation over the folds of R² (regression) and log loss
(binary), and the mean fit seconds. A postcode of a test fold that no training row
has is scored as missing (the estimators warn; the warning is silenced here).
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd
import torch
from sklearn.metrics import log_loss, r2_score
from sklearn.model_selection import KFold

from neumiss import NeuMissClassifier, NeuMissRegressor
from neumiss.baselines import BASELINES, make_baseline


def simulate(n_rows: int, n_categories: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    """The table and the regression target (see the module docstring)."""
    rng = np.random.default_rng(seed)
    frequency = 1.0 / np.arange(1, n_categories + 1) ** 0.8
    code = rng.choice(n_categories, size=n_rows, p=frequency / frequency.sum())
    effect = rng.normal(size=n_categories)
    mixing = np.eye(4) + 0.5
    numbers = rng.normal(size=(n_rows, 4)) @ mixing
    y = 1.5 * effect[code] + numbers @ np.array([1.0, -0.5, 0.5, 0.0]) + rng.normal(size=n_rows)
    frame = pd.DataFrame(numbers, columns=[f"x{j}" for j in range(4)])
    frame[rng.random(frame.shape) < 0.2] = np.nan
    postcode = pd.Series([f"p{c:05d}" for c in code], dtype=object)
    postcode[rng.random(n_rows) < 0.1] = None
    frame.insert(0, "postcode", postcode)
    return frame, y


def top_categories(train: pd.DataFrame, test: pd.DataFrame, keep: int = 99):
    """Both tables with the postcodes outside the training rows' ``keep`` most frequent
    as ``other``."""
    kept = set(train["postcode"].value_counts().index[:keep])

    def cut(frame):
        postcode = frame["postcode"]
        return frame.assign(postcode=postcode.where(postcode.isin(kept) | postcode.isna(),
                                                    "other"))

    return cut(train), cut(test)


def methods(task: str, seed: int) -> dict:
    """Name -> (make the model, prepare (train, test) tables); the anchors from the
    baseline registry, when their packages are installed."""
    neumiss = NeuMissRegressor if task == "regression" else NeuMissClassifier
    same = lambda train, test: (train, test)  # noqa: E731
    dropped = lambda train, test: (train.drop(columns="postcode"),  # noqa: E731
                                   test.drop(columns="postcode"))
    found = {
        "neumiss": (lambda: neumiss(random_state=seed), same),
        "neumiss_top99": (lambda: neumiss(random_state=seed), top_categories),
        "neumiss_dropped": (lambda: neumiss(random_state=seed), dropped),
    }
    kind = "regression" if task == "regression" else "classification"
    for name in ("catboost", "lightgbm"):
        why = BASELINES[name].unavailable()
        if why:
            print(f"{name} skipped: {why}")
        else:
            found[name] = (lambda name=name: make_baseline(name, kind, seed), same)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--categories", type=int, default=1000)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    # rare postcodes of a test fold that no training row has: scored as missing, as said
    warnings.filterwarnings("ignore", message="column 'postcode' has categories not seen")
    frame, y = simulate(args.rows, args.categories, args.seed)
    print(f"{args.rows} rows, {frame['postcode'].nunique()} postcodes seen, "
          f"{args.folds}-fold cross-validation, one thread per fit")
    folds = list(KFold(args.folds, shuffle=True, random_state=args.seed).split(frame))
    for task, target in (("regression", y), ("binary", (y > np.median(y)).astype(int))):
        print(f"\n{task} ({'R²' if task == 'regression' else 'log loss'})")
        for name, (make, prepare) in methods(task, args.seed).items():
            scores, seconds = [], []
            for train, test in folds:
                X_train, X_test = prepare(frame.iloc[train], frame.iloc[test])
                model = make()
                start = time.perf_counter()
                model.fit(X_train, target[train])
                seconds.append(time.perf_counter() - start)
                if task == "regression":
                    scores.append(r2_score(target[test], model.predict(X_test)))
                else:
                    scores.append(log_loss(target[test], model.predict_proba(X_test)[:, 1]))
            print(f"  {name:16s} {np.mean(scores):.4f} ± {np.std(scores):.4f}   "
                  f"fit {np.mean(seconds):6.2f} s")


if __name__ == "__main__":
    main()
