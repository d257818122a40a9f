"""Presets of the foundations chapter."""

PRESETS = {
    "foundations/deep_ensemble_basics": {
        # members copy the zoo's recipe of one architecture and differ only in their seed
        "common": {"seed": 0, "num_members": 4, "zoo_entry": "arch/small_cnn"},
        "smoke": {"test_subset": 512},
        "cpu": {"test_subset": 0},
        # the foundations page has no paper-scale data of its own: at paper scale it uses the paper zoo
        # (ImageNet) entry of the same name; packed-ensembles/tab01 holds the CIFAR comparison.
        "paper": {"test_subset": 0},
    },
}

PRESETS["foundations/benchmarks"] = {
    "common": {"results_folder": ""},
    "smoke": {},
    "cpu": {},
    "paper": {},
}
