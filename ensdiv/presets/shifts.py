"""Presets of the "Corruptions" page: corruption grids, shift-set samples, a robustness check."""

PRESETS = {
    "foundations/corruptions": {
        "common": {
            "seed": 0,  # seed of the corruptions drawn for the grids
            "image_index": 0,  # Fashion-MNIST test image shown in the grids
            "model": "small_cnn",  # the model of foundations/deep_ensemble_basics (member 0 is reused)
            "epochs": 3,
            "batch_size": 128,
            "lr": 0.05,
            "train_subset": 0,
            "eval_subset": 0,  # images per evaluation set (0: all 10,000)
            "build_sets": True,  # read the cached CPU-scale sets (built on first use)
            "damage_images": 8,  # images used to measure pixel damage per corruption and level
            "damage_size": 224,  # the resolution compared with 28 px in the damage table
            "data_root": "",  # paper scale: folder holding imagenet/val and ImageNet-C-bar
        },
        "smoke": {
            "model": "test_cnn",
            "epochs": 1,
            "train_subset": 1024,
            "eval_subset": 128,
            "build_sets": False,
            "damage_images": 2,
            "damage_size": 48,
        },
        "cpu": {},
        "paper": {},
    },
}
