"""Scale presets, one module per paper (or ``foundations``); see :mod:`ensdiv.config`."""
