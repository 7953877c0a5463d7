"""
Reading a fitted model: its depth, its head, its training curve
===============================================================

By default a NeuMiss estimator chooses its architecture on a validation split: the
number of Neumann iterations (``depth="auto"``), whether the iterations share one matrix
(``weight_sharing="auto"``) and whether the MLP head beats the paper's linear head
(``mlp_depth="auto"``). The fitted attributes say what it chose and why.
"""

# %%
# Fit with the defaults (one network)
# -----------------------------------
import matplotlib.pyplot as plt

from neumiss import NeuMissRegressor
from neumiss.simulation import make_regression

X, y, truth = make_regression(4_000, 8, mechanism="MCAR", random_state=0)
model = NeuMissRegressor(ensemble_size=1, random_state=0).fit(X, y)
print(model.summary())  # what the fit chose, and on which rows it validated
print("depth", model.best_depth_, "| weight sharing", model.weight_sharing_,
      "| MLP hidden layers", model.mlp_depth_, "| epochs", model.n_epochs_)
print(f"validation R2 {model.validation_score_:.4f}")

# %%
# The depth search
# ----------------
# Depths are tried in increasing order, each warm-started from the previous one; a deeper
# one replaces the best only when its validation loss is lower by more than one standard
# error, and the search stops after two depths in a row that do not improve.
for depth, result in model.depth_results_.items():
    print(f"depth {depth:2d}: validation loss {result['val_loss']:.4f}, "
          f"{result['epochs']} epochs")
for mlp_depth, result in model.head_results_.items():
    print(f"head with {mlp_depth} hidden layers: validation loss {result['val_loss']:.4f}")
# At depth 0 the two heads are blended: the MLP head's weight in the head kept
# (0: the linear head alone, 1: the MLP head alone).
print(f"MLP head's weight: {model.mlp_weight_:.2f}")

# %%
# Validation loss by depth, and the chosen network's training curve
# -----------------------------------------------------------------
fig, (left, right) = plt.subplots(1, 2, figsize=(8, 3))
depths = list(model.depth_results_)
left.plot(depths, [model.depth_results_[d]["val_loss"] for d in depths], marker="o")
left.axvline(model.best_depth_, color="black", linestyle="--", linewidth=0.8)
left.set_xlabel("depth")
left.set_ylabel("validation loss")
left.set_title("depth search")
right.plot(model.history_["train_loss"], label="training")
right.plot(model.history_["val_loss"], label="validation")
right.set_xlabel("epoch")
right.set_ylabel("loss (standardized target)")
right.set_title("training curve of the kept network")
right.legend()
fig.tight_layout()
