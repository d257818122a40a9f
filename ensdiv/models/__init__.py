"""Model registry and zoo: ``create_model``, ``list_models``, ``register_model``."""

from ensdiv.models.registry import ModelEntry, create_model, list_models, model_info, register_model
from ensdiv.models.stats import count_mult_adds, count_params

__all__ = ["ModelEntry", "count_mult_adds", "count_params", "create_model", "list_models", "model_info",
           "register_model"]
