"""
A mixed-type table, end to end to ONNX
======================================

A pandas DataFrame with numbers, categories and booleans, each with missing values, goes
into :class:`~neumiss.estimators.NeuMissClassifier` as it is: categories are one-hot
encoded inside the estimator, and a missing category marks its whole group missing. The
fitted model is saved, exported to ONNX and scored without torch by
:mod:`neumiss.scoring`, which gives the same probabilities as ``predict_proba``.
"""

# %%
# A table with missing values of every kind
# -----------------------------------------
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import neumiss
from neumiss import NeuMissClassifier
from neumiss.scoring import load_model, score_frame

rng = np.random.default_rng(0)
n = 3_000
table = pd.DataFrame({
    "age": rng.normal(45, 12, n),
    "income": rng.lognormal(10, 0.5, n),
    "plan": pd.Categorical(rng.choice(["basic", "plus", "pro"], n)),
    "online": pd.array(rng.random(n) < 0.5, dtype="boolean"),
})
logit = (0.05 * (table["age"] - 45) + 0.8 * (table["plan"] == "pro")
         - 0.6 * table["online"].astype(float) + 0.5 * np.log(table["income"] / 22_000))
churned = np.where(rng.random(n) < 1 / (1 + np.exp(-logit)), "yes", "no")
# Missing values: numbers (NaN), a category (NaN) and booleans (pd.NA).
for column, rate in [("age", 0.2), ("income", 0.3), ("plan", 0.15), ("online", 0.1)]:
    table.loc[rng.random(n) < rate, column] = None
print(table.head())

# %%
# Fit, save, export
# -----------------
model = NeuMissClassifier(ensemble_size=1, random_state=0).fit(table, churned)
print("classes", model.classes_, "encoded columns", model.encoder_.n_features_out_)
folder = Path(tempfile.mkdtemp())
model.save(folder / "model.pt")
model.to_onnx(folder / "model.onnx")
print(sorted(path.name for path in folder.iterdir()))

# %%
# Score with ONNX Runtime alone
# -----------------------------
# ``score_frame`` matches columns by name and encodes categories as at fit; it imports
# neither torch nor the estimator. A category never seen at fit is treated as missing.
new_rows = table.sample(1_000, random_state=1)
scored = score_frame(new_rows, load_model(folder / "model.onnx"))
print(scored.head())
python_proba = neumiss.load(folder / "model.pt").predict_proba(new_rows)[:, 1]
difference = np.abs(scored["proba_yes"].to_numpy() - python_proba).max()
print(f"largest difference ONNX - Python: {difference:.1e}")

# %%
# The two scorers agree
# ---------------------
fig, ax = plt.subplots(figsize=(4, 4))
ax.scatter(python_proba, scored["proba_yes"], s=4)
ax.plot([0, 1], [0, 1], color="black", linewidth=0.8)
ax.set_xlabel("predict_proba (Python, torch)")
ax.set_ylabel("ONNX Runtime (neumiss.scoring)")
fig.tight_layout()
