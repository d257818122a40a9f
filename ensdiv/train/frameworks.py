"""Training methods beyond plain supervised learning, each driven by a recipe's method part.

* :class:`~ensdiv.train.Distill` — knowledge distillation (:func:`ensdiv.losses.distillation`).
* :class:`~ensdiv.train.Pretrain` — pre-training on a source (supervised, or SimCLR-style contrastive:
  two random views, a 2-layer projection head, NT-Xent at temperature 0.5), then a linear probe on the
  frozen penultimate features of the recipe's training data, or end-to-end fine-tuning on it
  (training-methods' "framework" and "dataset" categories). The backbone is cached (kind
  ``"pretrained"``), so recipes that differ only in what follows pre-training share it.
* :class:`~ensdiv.train.Joint` — M members trained together on an ensemble loss of :mod:`ensdiv.losses`
  (a logits loss of ``ENSEMBLE_LOSSES``, or a loss of ``INPUT_LOSSES`` that also needs the batch's inputs,
  through :class:`InputLossStack`).
* :class:`~ensdiv.train.Heads` — M heads trained on the cached features of a frozen backbone recipe.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from ensdiv import losses
from ensdiv.data.registry import TensorSet, get_dataset
from ensdiv.errors import EnsdivError, InvalidInputError, unknown_name
from ensdiv.models.stack import HeadStack, MemberStack, cut_features, penultimate, vit_block_head
from ensdiv.store import Store
from ensdiv.train.augment import BatchAugment
from ensdiv.train.engine import LossFn, derive_seed, moved
from ensdiv.train.loop import cpu_state, fit
from ensdiv.train.recipes import Distill, Heads, Joint, Optim, Pretrain, Recipe

__all__ = [
    "distillation_loss",
    "SimCLR",
    "simclr_views",
    "pretrain_and_probe",
    "set_classifier",
    "joint_loss",
    "input_loss",
    "InputLossStack",
    "build_joint",
    "train_heads",
    "fit_heads",
    "head_features",
    "ood_features",
    "make_heads",
    "cut_features_all",
]


def distillation_loss(teacher: nn.Module, recipe: Recipe) -> LossFn:
    """``loss_fn(model, x, y)`` for :func:`ensdiv.train.fit` distilling ``teacher`` as ``recipe.method`` says."""
    method = recipe.method
    assert isinstance(method, Distill)
    teacher.eval()

    def loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        teacher.to(x.device)
        with torch.no_grad():
            t = teacher(x)
        return losses.distillation(
            model(x), t, y, mode=method.mode, temperature=method.temperature, alpha=method.alpha,
            label_smoothing=recipe.optim.label_smoothing,
        )

    return loss


def simclr_views(x: torch.Tensor) -> torch.Tensor:
    """One random view per image: resized crop (scale 0.4-1), horizontal flip, contrast/brightness, noise.

    Draws from torch's global generator (re-seeded per epoch by the engine).
    """
    n = x.shape[0]
    dev = x.device
    scale = torch.empty(n, device=dev).uniform_(0.4, 1.0).sqrt()
    flip = torch.where(torch.rand(n, device=dev) < 0.5, -1.0, 1.0)
    tx = (1 - scale) * torch.empty(n, device=dev).uniform_(-1, 1)
    ty = (1 - scale) * torch.empty(n, device=dev).uniform_(-1, 1)
    theta = torch.zeros(n, 2, 3, device=dev)
    theta[:, 0, 0], theta[:, 1, 1] = scale * flip, scale
    theta[:, 0, 2], theta[:, 1, 2] = tx, ty
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)
    v = F.grid_sample(x, grid, align_corners=False)
    v = v * torch.empty(n, 1, 1, 1, device=dev).uniform_(0.6, 1.4) + torch.empty(
        n, 1, 1, 1, device=dev
    ).uniform_(-0.2, 0.2)
    return (v + 0.05 * torch.randn_like(v)).clamp(0, 1)


_features = penultimate


class SimCLR(nn.Module):
    """A backbone plus a projection head, trained by :meth:`training_loss` (NT-Xent of two views)."""

    def __init__(self, backbone: nn.Module, feature_dim: int, proj_dim: int = 64, temperature: float = 0.5):
        super().__init__()
        self.backbone = backbone
        self.proj = nn.Sequential(
            nn.Linear(feature_dim, 128), nn.ReLU(inplace=True), nn.Linear(128, proj_dim)
        )
        self.temperature = temperature

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(_features(self.backbone, x))

    def training_loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return losses.nt_xent(self(simclr_views(x)), self(simclr_views(x)), temperature=self.temperature)


def set_classifier(model: nn.Module, weight: torch.Tensor, bias: torch.Tensor) -> None:
    """Reset the model's classifier to ``weight.shape[0]`` classes and copy the given weights in."""
    model.reset_classifier(weight.shape[0])
    heads = model.get_classifier()
    for head in heads if isinstance(heads, tuple | list) else (heads,):
        with torch.no_grad():
            head.weight.copy_(weight)
            head.bias.copy_(bias)


@torch.no_grad()
def all_features(model: nn.Module, x: torch.Tensor, batch: int = 1024) -> torch.Tensor:
    """Penultimate features of ``x`` in eval mode, batch by batch: ``(N, D)``."""
    model.eval()
    return torch.cat([penultimate(model, x[i : i + batch]).float() for i in range(0, len(x), batch)])


def _pretrain_config(recipe: Recipe) -> dict[str, Any]:
    method = recipe.method
    assert isinstance(method, Pretrain)
    seed = method.seed if method.seed >= 0 else recipe.seeds.init
    return {
        "model": recipe.model.to_dict(),
        "data": recipe.data.to_dict(),
        "optim": recipe.optim.replace(epochs=method.epochs, lr=method.lr or recipe.optim.lr).to_dict(),
        "subset_seed": recipe.seeds.subset,
        "seed": seed,
        # the head after pre-training does not change the backbone: probed and fine-tuned recipes share it
        "method": {k: v for k, v in method.to_dict().items() if k != "head"} | {"seed": seed},
    }


def pretrain_and_probe(
    recipe: Recipe,
    data: TensorSet,
    shape: dict[str, int],
    build_model: Callable[..., nn.Module],
    *,
    store: Store,
    progress: bool = True,
    accelerator: str = "auto",
    precision: str | None = None,
) -> nn.Module:
    """Pre-train a backbone as ``recipe.method`` (:class:`~ensdiv.train.Pretrain`) says, then fit a
    linear probe on ``data`` (``head="probe"``) or fine-tune the whole network on it (``head="finetune"``)
    with the recipe's optimisation settings.

    Args:
        build_model: ``build_model(recipe, init_seed=..., **shape)``, the freshly initialised model.

    Returns:
        The backbone with its classifier replaced by the probe (or the fine-tuned network), shaped like
        ``build_model(recipe, **shape)``.
    """
    method = recipe.method
    assert isinstance(method, Pretrain)
    # The pre-training source gets the image budget of the probe's data (the data subset) unless the method
    # names its own size (a larger source, as JFT is for ImageNet).
    n_source = method.source_size or recipe.data.subset
    source = get_dataset(method.dataset).subset(n_source, seed=recipe.seeds.subset) if method.dataset else data
    src_shape = (
        {**shape, "num_classes": max(source.num_classes, int(source.y.max()) + 1)}
        if method.objective == "supervised"
        else shape
    )
    pcfg = _pretrain_config(recipe)
    pseed = pcfg["seed"]
    model = build_model(recipe, init_seed=pseed, **src_shape)
    cached = store.load("pretrained", pcfg)
    if cached is not None:
        model.load_state_dict(cached)
    else:
        pre_optim = recipe.optim.replace(epochs=method.epochs, lr=method.lr or recipe.optim.lr, warmup_epochs=0,
                                         label_smoothing=0.0)
        common = dict(seed=pseed, accelerator=accelerator, precision=precision, progress=progress)
        if method.objective == "simclr":
            wrapper = SimCLR(model, int(penultimate(model.eval(), source.x[:2]).shape[1]))
            fit(wrapper, source, pre_optim, desc=f"{recipe.label} simclr", **common)
        else:
            fit(model, source, pre_optim, augment=recipe.data.augment, desc=f"{recipe.label} pretrain", **common)
        store.save("pretrained", pcfg, cpu_state(model))
    if method.head == "finetune":
        torch.manual_seed(moved(recipe.seeds.init))  # the fresh classifier's draw
        model.reset_classifier(shape["num_classes"])
        fit(model, data, recipe.optim, seed=recipe.seeds.order, augment=recipe.data.augment,
            crop_pad=recipe.data.crop_pad, accelerator=accelerator, precision=precision, progress=progress,
            desc=f"{recipe.label} fine-tune")
        return model.eval()
    # Linear probe on frozen penultimate features (standardised inside the head's weights afterwards).
    feats = all_features(model, data.x)
    mean, std = feats.mean(0), feats.std(0) + 1e-6
    probe_set = TensorSet(((feats - mean) / std)[:, :, None, None], data.y, f"{data.name}:features", data.classes)
    torch.manual_seed(moved(recipe.seeds.init))
    head = nn.Sequential(nn.Flatten(), nn.Linear(feats.shape[1], shape["num_classes"]))
    fit(head, probe_set, recipe.optim.replace(weight_decay=0.0, label_smoothing=0.0), seed=recipe.seeds.order,
        accelerator=accelerator, precision=precision, progress=progress, desc=f"{recipe.label} probe")
    lin = head[1]
    weight = lin.weight.detach() / std  # fold the standardisation into the linear layer
    bias = lin.bias.detach() - weight @ mean
    set_classifier(model, weight, bias)
    return model.eval()


def _options(method: Joint | Heads, optim: Optim) -> dict[str, Any]:
    options = dict(method.options)
    name = method.loss
    if name in ("independent", "sed", "naive_a2d", "naive_divdis", "balanced", *losses.INPUT_LOSSES) or (
        name.startswith("gncl")
    ):
        options.setdefault("label_smoothing", optim.label_smoothing)
    return options


def joint_loss(method: Joint | Heads, optim: Optim) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """``loss(logits (M, B, C), target)`` of a jointly trained ensemble: the named ensemble loss of
    :mod:`ensdiv.losses` with the method's λ and options (label smoothing passed to ``independent``).
    A loss of :data:`ensdiv.losses.INPUT_LOSSES` is not a logits loss: see :func:`input_loss`."""
    if method.loss in losses.INPUT_LOSSES:
        raise InvalidInputError(
            f"The loss {method.loss!r} needs the members' inputs, not only logits: a Joint recipe trains it "
            "through input_loss, a Heads recipe cannot use it."
        )
    if method.loss not in losses.ENSEMBLE_LOSSES:
        raise unknown_name("ensemble loss", method.loss, [*losses.ENSEMBLE_LOSSES, *losses.INPUT_LOSSES])
    fn = losses.ensemble_loss(method.loss)
    options = _options(method, optim)

    def loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return fn(logits, target, lam=method.lam, **options)

    return loss


def input_loss(method: Joint, optim: Optim) -> Callable[[nn.Module, torch.Tensor, torch.Tensor], torch.Tensor]:
    """``loss(stack, x, target)`` of a jointly trained ensemble whose loss is one of
    :data:`ensdiv.losses.INPUT_LOSSES` (it needs the inputs, e.g. to differentiate the logits with respect to
    them): the named loss with the method's λ and options (label smoothing passed on)."""
    if method.loss not in losses.INPUT_LOSSES:
        raise unknown_name("input-taking ensemble loss", method.loss, losses.INPUT_LOSSES)
    fn = losses.INPUT_LOSSES[method.loss]
    options = _options(method, optim)

    def loss(stack: nn.Module, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return fn(stack, x, target, lam=method.lam, **options)

    return loss


class InputLossStack(MemberStack):
    """A :class:`~ensdiv.models.MemberStack` whose :meth:`training_loss` hands the loss the stack itself and
    the batch's inputs: ``input_loss(self, x, y)`` (the losses of :data:`ensdiv.losses.INPUT_LOSSES`, which
    call ``self(x)`` for the ``(M, B, C)`` logits). Same parameters and ``state_dict`` as a MemberStack.

    Shape:
        ``(B, ...) -> (M, B, C)``.
    """

    def __init__(self, members: list[nn.Module], *, input_loss: Callable[..., torch.Tensor]) -> None:
        super().__init__(members)
        self.input_loss = input_loss

    def training_loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.input_loss(self, x, y)


def build_joint(recipe: Recipe, build_model: Callable[..., nn.Module], **shape: int) -> MemberStack:
    """The M freshly initialised members of a :class:`~ensdiv.train.Joint` recipe (member m seeded with
    ``init + m``) in a :class:`~ensdiv.models.MemberStack` carrying the recipe's ensemble loss (an
    :class:`InputLossStack` for a loss of :data:`ensdiv.losses.INPUT_LOSSES`)."""
    method = recipe.method
    assert isinstance(method, Joint)
    members = [build_model(recipe, init_seed=recipe.seeds.init + m, **shape) for m in range(method.members)]
    if method.loss in losses.INPUT_LOSSES:
        return InputLossStack(members, input_loss=input_loss(method, recipe.optim))
    return MemberStack(members, loss_fn=joint_loss(method, recipe.optim))


@torch.no_grad()
def cut_features_all(model: nn.Module, x: torch.Tensor, cut: str = "head", batch: int = 512) -> torch.Tensor:
    """Features of ``x`` at the cut point ``cut`` (:func:`ensdiv.models.stack.cut_features`), eval mode: ``(N, D)``."""
    model.eval()
    return torch.cat([cut_features(model, x[i : i + batch], cut).float() for i in range(0, len(x), batch)])


def head_features(recipe: Recipe, backbone: nn.Module, data: TensorSet, *, store: Store,
                  backbone_key: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    """The cached training features of a :class:`~ensdiv.train.Heads` recipe at its cut point: the clean
    pass, then ``feature_passes`` passes of the images augmented by ``DataSpec.augment`` (pass p seeded
    by ``Heads.pass_seed``, or the data-order seed when it is None, and p). Recipes with the same backbone,
    data and pass seed share one cached entry. Returns ``(features (N·(1+P), D), labels (N·(1+P),))``."""
    method = recipe.method
    assert isinstance(method, Heads)
    fcfg: dict[str, Any] = {"backbone": backbone_key, "data": recipe.data.to_dict(),
                            "subset_seed": recipe.seeds.subset}
    pass_seed = recipe.seeds.order if method.pass_seed is None else method.pass_seed
    if method.cut != "head" or method.feature_passes:
        fcfg.update(cut=method.cut, passes=method.feature_passes, order_seed=pass_seed)
    feats = store.load("features", fcfg)
    if feats is None:
        parts = [cut_features_all(backbone, data.x, method.cut)]
        aug = BatchAugment(recipe.data.augment, num_classes=max(data.num_classes, int(data.y.max()) + 1))
        for p in range(1, method.feature_passes + 1):
            gen = torch.Generator().manual_seed(derive_seed(pass_seed, p, 3))
            x_aug, _ = aug(data.x, data.y, gen)
            parts.append(cut_features_all(backbone, x_aug, method.cut))
        feats = torch.cat(parts)
        store.save("features", fcfg, feats)
    return feats, data.y.repeat(method.feature_passes + 1)


def ood_features(recipe: Recipe, backbone: nn.Module, *, store: Store, backbone_key: dict[str, Any]) -> torch.Tensor:
    """Cached features of the recipe's unlabeled OOD set (``Heads.ood_set``) at its cut point: ``(N_ood, D)``."""
    method = recipe.method
    assert isinstance(method, Heads)
    fcfg = {"backbone": backbone_key, "ood_set": method.ood_set, "cut": method.cut}
    feats = store.load("features", fcfg)
    if feats is None:
        feats = cut_features_all(backbone, get_dataset(method.ood_set).x, method.cut)
        store.save("features", fcfg, feats)
    return feats


def make_heads(method: Heads, backbone: nn.Module, *, seed: int = 0) -> list[nn.Module]:
    """``method.members`` heads, each a copy of the backbone's own last layer(s) at the cut point; with
    ``Heads.init == "seed"`` each copy is then re-initialised at random (every submodule's
    ``reset_parameters``, as a freshly built layer), head k from the generator seeded ``seed`` · 1000 + k, so
    two seeds give two different sets of initial heads and one seed always the same."""
    if method.cut == "block":
        heads = [vit_block_head(backbone) for _ in range(method.members)]
    else:
        clf = backbone.get_classifier()
        clf = clf[0] if isinstance(clf, tuple | list) else clf
        if not isinstance(clf, nn.Linear):
            raise TypeError(f"Heads need a backbone with a linear classifier, got a {type(clf).__name__}.")
        heads = []
        for _ in range(method.members):
            head = nn.Linear(clf.in_features, clf.out_features)
            head.load_state_dict(clf.state_dict())
            heads.append(head)
    if method.init == "seed":
        for k, head in enumerate(heads):
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(moved(seed * 1000 + k))
                for module in head.modules():
                    if hasattr(module, "reset_parameters"):
                        module.reset_parameters()
    return heads


def train_heads(
    recipe: Recipe,
    backbone: nn.Module,
    data: TensorSet,
    *,
    store: Store,
    backbone_key: dict[str, Any],
    progress: bool = True,
    accelerator: str = "auto",
    precision: str | None = None,
) -> HeadStack:
    """Fit the M heads of a :class:`~ensdiv.train.Heads` recipe on the frozen ``backbone``'s features of
    ``data`` at the recipe's cut point (computed once and cached as kind ``"features"``, with the
    augmented passes). Every head starts from the backbone's own last layer(s), re-initialised from the
    initialisation seed when ``Heads.init`` is ``seed`` (:func:`make_heads`); the data-order seed drives
    batches; heads are separate modules and only the batch's subset I (``Heads.subset``) is forwarded, so a
    head outside I gets no gradient and is not updated. A loss of :data:`ensdiv.losses.UNLABELED_LOSSES`
    gets each labelled sample paired with a sample of ``Heads.ood_set`` (a fixed pairing drawn with the
    data-order seed; batches reshuffle the pairs every epoch)."""
    method = recipe.method
    assert isinstance(method, Heads)
    feats, labels = head_features(recipe, backbone, data, store=store, backbone_key=backbone_key)
    ood = None
    if method.loss in losses.UNLABELED_LOSSES:
        if not method.ood_set:
            raise EnsdivError(f"The loss {method.loss!r} needs an unlabeled OOD set: Heads(ood_set='...').")
        ood = ood_features(recipe, backbone, store=store, backbone_key=backbone_key)
    return fit_heads(recipe, backbone, feats, labels, ood=ood, name=data.name, classes=data.classes,
                     progress=progress, accelerator=accelerator, precision=precision)


def fit_heads(recipe: Recipe, backbone: nn.Module, feats: torch.Tensor, labels: torch.Tensor, *,
              ood: torch.Tensor | None, name: str, classes: list[str], progress: bool = True,
              accelerator: str = "auto", precision: str | None = None) -> HeadStack:
    """The training step of :func:`train_heads` once the cut features are at hand (in-memory or streamed sets):
    ``feats (N, D)`` with ``labels (N,)`` and, for a loss of :data:`ensdiv.losses.UNLABELED_LOSSES`, the OOD
    features ``ood (N_ood, D)``, each labelled sample paired with one of them (a fixed pairing drawn with the
    data-order seed)."""
    method = recipe.method
    assert isinstance(method, Heads)
    paired = method.loss in losses.UNLABELED_LOSSES
    if paired:
        if ood is None:
            raise EnsdivError(f"The loss {method.loss!r} needs the features of an unlabeled OOD set (Heads.ood_set).")
        g = torch.Generator().manual_seed(derive_seed(recipe.seeds.order, 5))
        reps = -(-len(feats) // len(ood))
        pick = torch.cat([torch.randperm(len(ood), generator=g) for _ in range(reps)])[: len(feats)]
        feats = torch.cat([feats, ood[pick]], dim=1)
    stack = HeadStack(make_heads(method, backbone, seed=recipe.seeds.init), loss_fn=joint_loss(method, recipe.optim),
                      subset=method.subset,
                      paired_ood=paired, cut=method.cut).requires_grad_(True)  # copies of a frozen backbone's layers
    feature_set = TensorSet(feats[:, :, None, None], labels, f"{name}:features", classes)
    fit(stack, feature_set, recipe.optim, seed=recipe.seeds.order, accelerator=accelerator, precision=precision,
        progress=progress, desc=f"{recipe.label} heads")
    return stack
