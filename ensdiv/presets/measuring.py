"""Presets of the foundations page "Measuring diversity" (``notebooks/foundations/measuring_diversity``).

The members are exactly the deep ensemble of ``foundations/deep_ensemble_basics`` (same model,
seeds, epochs, subsets), so this page reuses those cached models and trains nothing new.
"""

from ensdiv.presets.foundations import PRESETS as _FOUNDATIONS

_BASE = _FOUNDATIONS["foundations/deep_ensemble_basics"]

PRESETS = {
    "foundations/measuring_diversity": {
        "common": {
            **_BASE["common"],
            "n_explain": 64,  # images explained with saliency / attacked with PGD
            "n_cka": 1000,  # images streamed through MinibatchCKA
            "cka_batch": 250,
            "pgd_steps": 50,  # as in attack-similarity §2
            "pgd_eps": 0.1,  # L∞ radius in [0, 1] pixel units (Fashion-MNIST needs more than 8/255)
            "ood": "inverted",  # synthetic OOD set: "inverted" (1 - x) or "noise" (uniform)
        },
        "smoke": {**_BASE["smoke"], "n_explain": 8, "n_cka": 128, "cka_batch": 64, "pgd_steps": 2},
        "cpu": {**_BASE["cpu"]},
        "paper": {**_BASE["paper"]},
    },
}
