"""Two-model measures of training-methods (Gontijo-Lopes et al.): error (in)consistency, conversion, angle.

Predictions of two models A and B are shaped (N,) each, labels (N,). Scalars are 0-d float64
tensors; undefined values are NaN with a :class:`RuntimeWarning`.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ensdiv.errors import InvalidInputError
from ensdiv.metrics.checks import (
    as_tensor,
    check_labels,
    check_preds,
    check_same_shape,
    compute_dtype,
    nan_with_warning,
)

__all__ = ["error_inconsistency", "error_consistency", "conversion_rate", "specialization_angle"]


def _two_models(
    preds_a: Any, preds_b: Any, labels: Any, validate: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    a = check_preds(preds_a, "preds_a", ndim=1, validate=validate)
    b = check_preds(preds_b, "preds_b", ndim=1, validate=validate)
    check_same_shape(a, b, "preds_a", "preds_b", validate=validate)
    labels = check_labels(labels, a.shape[0], validate=validate)
    if validate and a.shape[0] == 0:
        raise InvalidInputError("Need at least one sample, got N = 0.")
    return a == labels, b == labels, labels


def error_inconsistency(preds_a: Any, preds_b: Any, labels: Any, *, validate_args: bool = True) -> torch.Tensor:
    """Error inconsistency of training-methods §3 (Fig. 1): fraction of samples where exactly one model is right.

    Equal to :func:`~ensdiv.metrics.oracle_disagreement` (Eq. 4 of design-diversity) of the pair.

    Args:
        preds_a: class predictions of model A, shape (N,).
        preds_b: class predictions of model B, shape (N,).
        labels: true classes, shape (N,).
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        float64 in [0, 1].

    Shape:
        (N,), (N,), (N,) -> () (0-d).

    Example:
        >>> error_inconsistency(torch.tensor([0, 1, 2]), torch.tensor([0, 0, 0]), torch.tensor([0, 1, 0]))
        tensor(0.6667, dtype=torch.float64)
    """
    ca, cb, _ = _two_models(preds_a, preds_b, labels, validate_args)
    return (ca != cb).double().mean()


def error_consistency(preds_a: Any, preds_b: Any, labels: Any, *, validate_args: bool = True) -> torch.Tensor:
    """Error consistency κ of Geirhos et al. (2020), which training-methods §3 complements.

    κ = (c_obs - c_exp) / (1 - c_exp), c_obs = fraction where both are right or both wrong,
    c_exp = p_a p_b + (1 - p_a)(1 - p_b) with p the accuracies (Cohen's kappa of the 0/1 correctness).
    Ambiguity resolved: NaN (with a warning) when c_exp = 1 (both always right, or always wrong).

    Args:
        preds_a: class predictions of model A, shape (N,).
        preds_b: class predictions of model B, shape (N,).
        labels: true classes, shape (N,).
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        float64 in [-1, 1] (or NaN).

    Shape:
        (N,), (N,), (N,) -> () (0-d).

    Example:
        >>> y = torch.tensor([0, 1, 2, 3])  # right on [1, 1, 0, 0] and [1, 0, 1, 0]: chance agreement
        >>> error_consistency(torch.tensor([0, 1, 0, 0]), torch.tensor([0, 0, 2, 0]), y)
        tensor(0., dtype=torch.float64)
    """
    ca, cb, _ = _two_models(preds_a, preds_b, labels, validate_args)
    c_obs = (ca == cb).double().mean()
    pa, pb = ca.double().mean(), cb.double().mean()
    c_exp = pa * pb + (1 - pa) * (1 - pb)
    if float(c_exp) >= 1.0 - 1e-12:
        return nan_with_warning("error_consistency is undefined when both models are always right or always wrong.")
    return (c_obs - c_exp) / (1 - c_exp)


def conversion_rate(
    ens_preds: Any, preds_a: Any, preds_b: Any, labels: Any, *, validate_args: bool = True
) -> torch.Tensor:
    """Conversion rate of training-methods §4 (Fig. 2, right): the fraction of inconsistent errors the ensemble fixes.

    Over the samples where exactly one of models A and B is correct, the fraction where the
    ensemble's prediction is correct. Ambiguity resolved: NaN (with a warning) when there is no
    such sample.

    Args:
        ens_preds: predictions of the ensemble of A and B, shape (N,).
        preds_a: predictions of model A, shape (N,).
        preds_b: predictions of model B, shape (N,).
        labels: true classes, shape (N,).
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        float64 in [0, 1] (or NaN).

    Shape:
        (N,), (N,), (N,), (N,) -> () (0-d).

    Example:
        >>> a, b, y = torch.tensor([0, 1, 2]), torch.tensor([0, 0, 0]), torch.tensor([0, 1, 0])
        >>> conversion_rate(torch.tensor([0, 1, 2]), a, b, y)  # of samples 1 and 2, it gets 1 right
        tensor(0.5000, dtype=torch.float64)
    """
    ca, cb, labels = _two_models(preds_a, preds_b, labels, validate_args)
    e = check_preds(ens_preds, "ens_preds", ndim=1, validate=validate_args)
    check_same_shape(e, ca, "ens_preds", "labels", validate=validate_args)
    mask = ca != cb
    if not bool(mask.any()):
        return nan_with_warning("conversion_rate is undefined: no sample where exactly one model is correct.")
    return (e[mask] == labels[mask]).double().mean()


def specialization_angle(conf_a: Any, conf_b: Any, *, degrees: bool = True, validate_args: bool = True) -> torch.Tensor:
    """Angle in the confidence–confidence plane, training-methods §4.3 (Fig. 3): θ = atan2(conf_a, conf_b).

    θ is measured from the model-B axis, so it is high (towards 90°) when model A is the more
    confident one, 45° when both are equally confident, low when B is more confident (the paper:
    "when θ is high, Model 1 is more confident"). Confidences are typically each model's
    (temperature-calibrated) maximum softmax probability, or its probability of the true class.

    Args:
        conf_a: non-negative confidences of model A, shape (N,).
        conf_b: non-negative confidences of model B, shape (N,).
        degrees: return degrees in [0, 90] (default) instead of radians.
        validate_args: check the inputs (``False`` skips every check).

    Returns:
        Angles in :func:`~ensdiv.metrics.checks.compute_dtype` of the inputs (float32 for bf16).

    Shape:
        (N,), (N,) -> (N,).

    Example:
        >>> specialization_angle(torch.tensor([1.0, 0.5, 0.0]), torch.tensor([0.0, 0.5, 1.0]))
        tensor([90., 45.,  0.])
    """
    a = as_tensor(conf_a, "conf_a", validate=validate_args)
    b = as_tensor(conf_b, "conf_b", validate=validate_args)
    check_same_shape(a, b, "conf_a", "conf_b", validate=validate_args)
    if validate_args and (bool((a < 0).any()) or bool((b < 0).any())):
        raise InvalidInputError("Confidences must be non-negative (e.g. maximum softmax probabilities).")
    dt = compute_dtype(torch.promote_types(a.dtype, b.dtype))
    theta = torch.atan2(a.to(dt), b.to(dt))
    return theta * (180.0 / math.pi) if degrees else theta
