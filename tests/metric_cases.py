"""The one shared harness of the metric tests: seeded inputs and a dtype sweep against a reference.

Generators return float64 tensors (or int64 for predictions and labels); :func:`run_over_dtypes`
casts the floating inputs to each dtype, runs the metric, checks the result dtype of the metrics
contract (float32 for bf16/fp16, the input's float dtype otherwise, float64 for integer inputs)
and compares it with a reference computed in float64 on the *same rounded inputs*, so the
tolerance only has to cover the metric's own arithmetic in its compute dtype.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

DTYPES = (torch.float32, torch.float64, torch.bfloat16)

#: (rtol, atol) for a result computed in this dtype, vs a float64 reference on the same inputs.
COMPUTE_TOL = {torch.float64: (1e-9, 1e-12), torch.float32: (2e-5, 2e-6)}
#: (rtol, atol) between a metric of rounded inputs of this dtype and of the float64 originals.
INPUT_TOL = {
    torch.float64: (1e-9, 1e-12),
    torch.float32: (1e-5, 1e-6),
    torch.bfloat16: (2e-2, 2e-2),
    torch.float16: (4e-3, 4e-3),
}


def generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(int(seed))


def labels(n: int, c: int, *, seed: int = 0) -> torch.Tensor:
    """Uniform random labels (N,) in 0..C-1."""
    return torch.randint(0, c, (n,), generator=generator(seed + 1_000_003))


def member_logits(
    m: int, n: int, c: int, *, seed: int = 0, scale: float = 2.0, signal: Any = 0.0, y: torch.Tensor | None = None
) -> torch.Tensor:
    """Gaussian member logits (M, N, C), float64; ``signal`` (a number or (M,)) is added to the label's logit."""
    z = torch.randn(m, n, c, generator=generator(seed), dtype=torch.float64) * scale
    if y is not None:
        z[:, torch.arange(n), y] += torch.as_tensor(signal, dtype=torch.float64).reshape(-1, 1)
    return z


def member_probs(m: int, n: int, c: int, *, seed: int = 0, scale: float = 2.0) -> torch.Tensor:
    """Member softmax probabilities (M, N, C), float64."""
    return member_logits(m, n, c, seed=seed, scale=scale).softmax(-1)


def member_preds(m: int, n: int, c: int, *, seed: int = 0) -> torch.Tensor:
    """Uniform random class predictions (M, N), int64."""
    return torch.randint(0, c, (m, n), generator=generator(seed))


def preds_and_labels(m: int = 4, n: int = 60, c: int = 5, *, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    return member_preds(m, n, c, seed=seed), labels(n, c, seed=seed)


def zoo(m: int = 6, n: int = 120, c: int = 4, *, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Member logits of increasing accuracy (signal 0 .. 1.5 on the label) and their labels."""
    y = labels(n, c, seed=seed)
    return member_logits(m, n, c, seed=seed, scale=1.0, signal=torch.linspace(0.0, 1.5, m), y=y), y


def two_models(n: int = 200, c: int = 3, *, seed: int = 5) -> tuple[torch.Tensor, ...]:
    """Predictions of models A (~70 % right), B (~60 %), an ensemble mixing them, and labels."""
    g = generator(seed)
    y = torch.randint(0, c, (n,), generator=g)
    a = torch.where(torch.rand(n, generator=g) < 0.7, y, (y + 1) % c)
    b = torch.where(torch.rand(n, generator=g) < 0.6, y, (y + 2) % c)
    ens = torch.where(torch.rand(n, generator=g) < 0.5, a, b)
    return a, b, ens, y


def detection_scores(n_id: int = 80, n_ood: int = 50, *, seed: int = 0, decimals: int = 1) -> tuple[torch.Tensor, ...]:
    """In-distribution and OOD scores (OOD higher on average), rounded so that ties occur."""
    g = generator(seed)
    sid = torch.randn(n_id, generator=g, dtype=torch.float64)
    sood = torch.randn(n_ood, generator=g, dtype=torch.float64) + 1.0
    return sid.round(decimals=decimals), sood.round(decimals=decimals)


def result_dtype(dtype: torch.dtype) -> torch.dtype:
    """The metrics contract: float32 for bf16/fp16, the float dtype itself, float64 for integers."""
    if dtype in (torch.bfloat16, torch.float16):
        return torch.float32
    return dtype if dtype.is_floating_point else torch.float64


def cast(x: Any, dtype: torch.dtype) -> Any:
    """Floating tensors to ``dtype``; anything else unchanged."""
    return x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x


def upcast(x: Any) -> Any:
    """Floating tensors to float64 (exactly: every bf16/fp16/fp32 value is a float64)."""
    return x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x


def assert_close(actual: Any, expected: Any, *, rtol: float, atol: float) -> None:
    """Compare as float64, NaN equal to NaN, shapes equal."""
    a = torch.as_tensor(np.asarray(actual.detach().cpu() if isinstance(actual, torch.Tensor) else actual)).double()
    e = torch.as_tensor(
        np.asarray(expected.detach().cpu() if isinstance(expected, torch.Tensor) else expected)
    ).double()
    torch.testing.assert_close(a, e.reshape(a.shape), rtol=rtol, atol=atol, equal_nan=True)


def run_over_dtypes(
    metric: Callable[..., torch.Tensor],
    inputs: Sequence[Any],
    reference: Callable[..., Any],
    *,
    dtypes: Sequence[torch.dtype] = DTYPES,
    rtol: float | None = None,
    atol: float | None = None,
    **kwargs: Any,
) -> None:
    """Run ``metric(*inputs, **kwargs)`` with the floating inputs cast to each dtype.

    For each dtype: the result must be a tensor of :func:`result_dtype`, and equal (within the
    compute dtype's tolerance, or ``rtol``/``atol``) to ``reference(*inputs_upcast)``, where the
    reference sees the same rounded values in float64 (numpy arrays via ``.numpy()`` are fine).
    """
    for dt in dtypes:
        args = [cast(x, dt) for x in inputs]
        out = metric(*args, **kwargs)
        assert isinstance(out, torch.Tensor), f"{metric.__name__} returned {type(out).__name__} for {dt}"
        float_in = [x for x in args if isinstance(x, torch.Tensor) and x.is_floating_point()]
        want_dtype = result_dtype(float_in[0].dtype) if float_in else torch.float64
        assert out.dtype == want_dtype, f"{metric.__name__}({dt}) returned {out.dtype}, expected {want_dtype}"
        want = reference(*[upcast(x) for x in args])
        r, a = COMPUTE_TOL[result_dtype(dt)]
        assert_close(out, want, rtol=r if rtol is None else rtol, atol=a if atol is None else atol)


def bad(fn: Callable[[], Any], match: str | None = None) -> Exception:
    """Assert ``fn()`` raises an error that is both an EnsdivError and a ValueError; return it."""
    import re

    from ensdiv.errors import EnsdivError

    try:
        fn()
    except Exception as err:  # noqa: BLE001 - the point is to inspect whatever was raised
        assert isinstance(err, EnsdivError) and isinstance(err, ValueError), f"{type(err).__name__}: {err}"
        if match is not None:
            assert re.search(match, str(err)), f"{match!r} not in {err}"
        return err
    raise AssertionError("no error was raised")
