"""What a fit chose and on which rows it validated, in a few lines of text: the Python
side of R's ``print()`` / ``summary()`` (:meth:`BaseNeuMiss.summary`)."""

from __future__ import annotations

from sklearn.utils.validation import check_is_fitted

#: How each validation scheme (``validation_scheme_``) is told.
SCHEMES = {
    "holdout": "held out",
    "out_of_fold": "out of fold (every row, each by the member that did not train on it)",
    "validation_data": "from validation_data",
    "none": "",
}


def _head(estimator) -> str:
    """The head: linear, MLP or their blend, with the mask's and the spline's terms."""
    if estimator.mlp_depth_ == 0:
        head = "linear head"
    else:
        layers = "layer" if estimator.mlp_depth_ == 1 else "layers"
        head = f"MLP head ({estimator.mlp_depth_} hidden {layers} of {estimator.mlp_width_})"
        if estimator.mlp_weight_ < 1.0:
            head += f" blended with the linear head (MLP weight {estimator.mlp_weight_:.2f})"
    if estimator.mask_skip_:
        head += " seeing the mask"
    if estimator.spline_:
        head += f", splines ({estimator.spline_ramps_} ramps)"
    return head


def _columns(encoder) -> str:
    """The input columns and how they are encoded."""
    parts = []
    categorical = [c for c in encoder.columns_ if c.kind == "categorical"]
    one_hot = [c for c in categorical if not c.target_encoded]
    if one_hot:
        parts.append(f"{len(one_hot)} categorical ({sum(c.width for c in one_hot)} one-hot)")
    target = [str(c.name) for c in categorical if c.target_encoded]
    if target:
        parts.append(f"target statistics of {', '.join(target)}")
    booleans = sum(c.kind == "boolean" for c in encoder.columns_)
    if booleans:
        parts.append(f"{booleans} boolean")
    coded = [f"{c.name} ({len(c.levels)})" for c in encoder.columns_ if c.levels]
    if coded:
        parts.append(f"an indicator per integer value of {', '.join(coded)}")
    described = f": {'; '.join(parts)}" if parts else ""
    return (f"{len(encoder.columns_)} columns -> {encoder.n_features_out_} encoded"
            f"{described}")


def describe(estimator) -> str:
    """A few lines on a fitted NeuMiss estimator: its network (depth, weights, head,
    members, epochs), its input columns and their encoding, the target's scale
    (regressors), the C of its heads' logistic start and the class weights (classifiers),
    its validation rows, scheme and score, and the temperature its probabilities were
    calibrated with (classifiers)."""
    check_is_fitted(estimator, "network_")
    name = type(estimator).__name__
    members = int(estimator.ensemble_size)
    trained = (f"{estimator.n_epochs_} epochs (best {estimator.best_epoch_})"
               if estimator.n_epochs_ else "the start from the data kept untrained")
    lines = [
        f"{name}: depth {estimator.best_depth_} ({estimator.weight_sharing_} weights), "
        f"{_head(estimator)}; {members} member{'s' if members > 1 else ''}, {trained}",
        f"Input: {_columns(estimator.encoder_)}",
    ]
    if getattr(estimator, "log_target_", False):
        lines.append("Target: fitted on the log scale (log_target), predictions are exp() "
                     "of it")
    if hasattr(estimator, "start_C_"):
        chosen = " (chosen on the held-out rows)" if estimator.start_C_ != 1.0 else ""
        lines.append(f"Linear start: logistic regression with C = {estimator.start_C_:.3g}"
                     f"{chosen}")
    if getattr(estimator, "class_weight", None) is not None:
        weights = ", ".join(f"{label} {weight:.3g}" for label, weight
                            in zip(estimator.classes_.tolist(), estimator.class_weight_))
        lines.append(f"Class weights: {weights} (class_weight={estimator.class_weight!r}; "
                     "every loss weighted, the probabilities those of the reweighted classes)")
    n_val, scheme = estimator.n_validation_rows_, estimator.validation_scheme_
    if scheme == "none":
        lines.append("Validation: none (validation_fraction=0: the training loss decided)")
    else:
        metric, sign = estimator._score_metric
        lines.append(f"Validation: {n_val} rows {SCHEMES[scheme]}; {metric} "
                     f"{sign * estimator.validation_score_:.4f}")
    calibration = getattr(estimator, "calibration_result_", None)
    if calibration is not None:
        lines.append(f"Calibration: logits divided by the temperature "
                     f"{calibration['temperature']:.3g} (validation log loss "
                     f"{calibration['val_loss_before']:.4f} -> {calibration['val_loss']:.4f})")
    return "\n".join(lines)
