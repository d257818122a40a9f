"""Presets of the zoo notebook (foundations/zoo): which zoo entries the table shows at each scale."""

PRESETS = {
    "foundations/zoo": {
        # only: keys or glob patterns of ensdiv.zoo.ZOO[scale];
        # train: build missing models (False: show what is cached)
        "common": {"only": ["arch/*", "dd/*"], "train": True},
        "smoke": {"only": ["arch/mlp", "arch/small_cnn", "arch/resnet", "arch/vit"]},
        "cpu": {},
        # paper scale needs ImageNet (see ensdiv.zoo); with train=False the table lists what is cached.
        "paper": {"train": False},
    },
}
