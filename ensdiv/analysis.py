"""Statistical analysis shared by the chapters: trend lines with confidence bands.

Several papers draw "the trend line and its 90 % confidence interval" (attack-similarity Fig. 2 / G.1 /
G.2; design-diversity Fig. 7): :func:`trend_line` is that, with statsmodels' OLS and Pearson's r.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import statsmodels.api as sm
from scipy.stats import pearsonr

__all__ = ["trend_line"]


def trend_line(x: Any, y: Any, *, ci: float = 0.90) -> dict[str, Any]:
    """OLS trend of ``y`` on ``x`` with a ``ci`` confidence band (statsmodels) and Pearson's r, p.

    The paper's Fig. 2 / G.1 / G.2 draw "the trend line and its 90% confidence interval". NaN pairs
    are dropped. Returns ``{"r", "p", "n", "slope", "band"}`` where ``band`` is a DataFrame with
    columns ``x, mean, lower, upper`` on a grid of 50 points.
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = ~(np.isnan(x) | np.isnan(y))
    x, y = x[keep], y[keep]
    if len(x) < 3 or np.ptp(x) == 0:
        return {"r": float("nan"), "p": float("nan"), "n": len(x), "slope": float("nan"), "band": None}
    fit = sm.OLS(y, sm.add_constant(x)).fit()
    grid = np.linspace(x.min(), x.max(), 50)
    frame = fit.get_prediction(sm.add_constant(grid)).summary_frame(alpha=1 - ci)
    band = pd.DataFrame({"x": grid, "mean": frame["mean"].to_numpy(),
                         "lower": frame["mean_ci_lower"].to_numpy(),
                         "upper": frame["mean_ci_upper"].to_numpy()})  # fmt: skip
    r, p = pearsonr(x, y)
    return {"r": float(r), "p": float(p), "n": int(len(x)), "slope": float(fit.params[1]), "band": band}
