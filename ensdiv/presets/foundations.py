"""Presets of the foundations chapter."""

PRESETS = {
    "foundations/deep_ensemble_basics": {
        "common": {"seed": 0, "num_members": 4, "model": "small_cnn", "batch_size": 128, "lr": 0.05},
        "smoke": {"epochs": 1, "train_subset": 1024, "test_subset": 512, "model": "test_cnn"},
        "cpu": {"epochs": 3, "train_subset": 0, "test_subset": 0},
        "paper": {"epochs": 3, "train_subset": 0, "test_subset": 0},
    },
}

PRESETS["foundations/benchmarks"] = {
    "common": {"results_folder": ""},
    "smoke": {},
    "cpu": {},
    "paper": {},
}
