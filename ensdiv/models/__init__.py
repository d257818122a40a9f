"""Model registry and zoo: ``create_model``, ``list_models``, ``register_model``."""

from ensdiv.models.registry import ModelEntry, create_model, list_models, model_info, register_model

__all__ = ["ModelEntry", "create_model", "list_models", "model_info", "register_model"]
