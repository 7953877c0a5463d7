"""Each member at its own best epoch, against every member at the ensemble's (issue 22).

    python benchmarks/member_epochs.py                      # 10k x 10 MCAR, seeds 0-3
    python benchmarks/member_epochs.py --tasks un_lifeexp titanic --folds 3

The defaults train their members together (:class:`neumiss.network.StackedNetwork`) and
stop them together, at the epoch of the ensemble's lowest validation loss. This script
measures the alternative: while the defaults train as usual, every epoch also scores
each member on the validation rows (its own held-out rows under out-of-fold
validation) and keeps a copy of the member (the block and its head, a whole network)
at its own lowest loss; the fitted ensemble is then made of those copies. The fits
are otherwise the same (same seeds, same search), so the test scores differ only by
the epochs kept. Real tasks need the suite's cache (``bash scripts/setup_realdata.sh``).

The variant is hooked into the package from here (it is not an option of the
estimators): :class:`~neumiss.network._stopping.EarlyStopping` and
:meth:`~neumiss.network.StackedNetwork.to_network` are wrapped for the run.
"""

from __future__ import annotations

import argparse
import contextlib
import math

import torch
from sklearn.metrics import log_loss

import neumiss
from neumiss.network import EnsembleNetwork, StackedNetwork, _search, _stopping


class OwnEpochs:
    """While active, each stacked network trained keeps a copy of each member at the
    member's lowest validation loss, and becomes the ensemble of those copies."""

    def __init__(self) -> None:
        self.enabled = False
        self.validation = None

    def member_losses(self, network: StackedNetwork) -> list[float]:
        data, loss_fn = self.validation
        network.eval()
        with torch.no_grad():
            outputs = network.member_outputs(data.x, data.mask)  # (K, n, n_outputs)
        losses = []
        for k, output in enumerate(outputs):
            row = loss_fn(output, data.target)
            weight = torch.ones_like(row) if data.weight is None else data.weight
            if data.held_out_by is not None:  # out of fold: the member's own rows
                weight = weight * (data.held_out_by == k)
            losses.append(float((row * weight).sum() / weight.sum()))
        return losses

    @contextlib.contextmanager
    def hooked(self):
        train, update, to_network = _search.train, _stopping.EarlyStopping.update, \
            StackedNetwork.to_network
        own = self

        def hooked_train(network, train_data, val_data, loss_fn, *args, **kwargs):
            own.validation = None if val_data is None else (val_data, loss_fn)
            if isinstance(network, StackedNetwork):
                network.__dict__["_own"] = [(math.inf, None)] * network.n_members
            return train(network, train_data, val_data, loss_fn, *args, **kwargs)

        def hooked_update(stopping, epoch, loss, score):
            update(stopping, epoch, loss, score)
            network = stopping.network
            kept = network.__dict__.get("_own") if isinstance(network, StackedNetwork) else None
            if kept is None or own.validation is None:
                return
            members = None
            for k, member_loss in enumerate(own.member_losses(network)):
                if member_loss < kept[k][0]:
                    members = members or network.networks()
                    kept[k] = (member_loss, members[k])

        def hooked_to_network(network):
            kept = network.__dict__.get("_own")
            if (not own.enabled or network.n_members == 1 or not kept
                    or any(member is None for _, member in kept)):
                return to_network(network)
            return EnsembleNetwork([member for _, member in kept], network.combine)

        _search.train, _stopping.EarlyStopping.update = hooked_train, hooked_update
        StackedNetwork.to_network = hooked_to_network
        try:
            yield
        finally:
            _search.train, _stopping.EarlyStopping.update = train, update
            StackedNetwork.to_network = to_network


def _both(own: OwnEpochs, fit_score) -> tuple[float, float]:
    """``fit_score()`` with the ensemble's epoch, then with each member's own."""
    scores = []
    for enabled in (False, True):
        own.enabled = enabled
        scores.append(fit_score())
    return scores[0], scores[1]


def simulated(own: OwnEpochs, seeds) -> None:
    print("| 10k x 10 MCAR | ensemble's epoch (R2 - Bayes) | own epochs | difference |")
    print("|---|---|---|---|")
    for seed in seeds:
        X, y, truth = neumiss.simulation.make_regression(20_000, 10, mechanism="MCAR",
                                                         random_state=seed)
        bayes = truth.bayes_rate(X[10_000:], y[10_000:])
        joint, members = _both(own, lambda X=X, y=y, seed=seed: neumiss.NeuMissRegressor(
            random_state=seed).fit(X[:10_000], y[:10_000]).score(X[10_000:], y[10_000:]))
        print(f"| seed {seed} | {joint - bayes:+.4f} | {members - bayes:+.4f} | "
              f"{members - joint:+.4f} |", flush=True)


def real(own: OwnEpochs, names, n_folds: int, cache: str) -> None:
    from neumiss.benchmark.realdata._cache import load_task
    from neumiss.benchmark.realdata._protocol import fold_indices, method_seed
    from neumiss.benchmark.realdata._tasks import TASKS

    print("| task | fold | ensemble's epoch | own epochs | difference |")
    print("|---|---|---|---|---|")
    for name in names:
        task = TASKS[name]
        X, y = load_task(task, cache)
        for repeat, fold in [(0, 0), (0, 1), (1, 2), (1, 3), (0, 4)][:n_folds]:
            train_rows, test_rows = fold_indices(y, task.kind, repeat, 0)[fold]
            seed = method_seed(0, repeat, fold)

            def fit_score(train_rows=train_rows, test_rows=test_rows, seed=seed, X=X, y=y,
                          kind=task.kind):
                X_train, X_test = X.iloc[train_rows], X.iloc[test_rows]
                if kind == "binary":  # minus the log loss: higher is better
                    model = neumiss.NeuMissClassifier(random_state=seed)
                    proba = model.fit(X_train, y[train_rows]).predict_proba(X_test)
                    return -log_loss(y[test_rows], proba, labels=[0, 1])
                model = neumiss.NeuMissRegressor(random_state=seed)
                return model.fit(X_train, y[train_rows]).score(X_test, y[test_rows])

            joint, members = _both(own, fit_score)
            print(f"| {name} | ({repeat}, {fold}) | {joint:.4f} | {members:.4f} | "
                  f"{members - joint:+.4f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2, 3],
                        help="seeds of the 10k x 10 MCAR case (none: skip it)")
    parser.add_argument("--tasks", nargs="*", default=[],
                        help="real-data suite tasks (R2, or minus the log loss)")
    parser.add_argument("--folds", type=int, default=3, help="folds per task (at most 5)")
    parser.add_argument("--cache", default="benchmark_results/realdata_cache")
    args = parser.parse_args()
    torch.set_num_threads(1)
    own = OwnEpochs()
    with own.hooked():
        if args.seeds:
            simulated(own, args.seeds)
        if args.tasks:
            real(own, args.tasks, args.folds, args.cache)


if __name__ == "__main__":
    main()
