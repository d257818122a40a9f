"""Paper-scale data from local folders in the published layouts (CIFAR, SVHN, ImageNet and its shift sets).

Nothing is downloaded at run time: the loaders read ``$ENSDIV_DATA`` and say what was expected where.
:mod:`~ensdiv.data.paper.sets` holds the loaders, :mod:`~ensdiv.data.paper.tensors` registers
in-memory registry sets (``cifar10/test``, ``imagenet/val-5k``, ...).
"""

from ensdiv.data.paper import tensors  # noqa: F401 - registers the paper-scale sets
from ensdiv.data.paper.sets import PAPER_SETS, eval_transform, load_paper_set
from ensdiv.data.paper.tensors import PipelineSets, by_pipeline, imagenet_val_pipelines, pipeline_of

__all__ = ["PAPER_SETS", "eval_transform", "load_paper_set", "PipelineSets", "imagenet_val_pipelines", "pipeline_of",
           "by_pipeline"]
