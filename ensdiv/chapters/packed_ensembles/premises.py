"""The premises the paper states for Table 1's "Packed-Ensembles matches Deep Ensembles", measured on the run.

A premise is a condition the paper itself puts on its claim; a scale that fails it cannot test the claim, so the
claim reads *not testable at this scale* with the measured numbers shown (``ed.report.claim(untestable=...)``),
instead of a verdict on a setting the paper excludes.

- **Capacity.** "ResNet-18 architecture does not have enough representation capacity to be divided into
  subnetworks for CIFAR-100 [...] given a sufficiently large network, Packed-Ensembles is able to match Deep
  Ensembles" (§4, Results). The book's reading: PE's narrowest group of channels, relative to the single model's
  narrowest convolution, is at least the paper's own ResNet-18 PE's on CIFAR-10, the setting where the paper
  finds PE close to DE (the reference implementation keeps at least 64 input channels per group, so γ only acts
  in the wide stages). On the small CPU backbone with γ in every layer (``min_channels_per_group`` 0) the groups
  are half as wide, relative to the network, as the paper's.
- **Converged.** The paper trains each model on the schedules of its Table 4 and keeps "the one with the highest
  accuracy" (§4, Metrics). The book's reading: the budget curve's own plateau test
  (:func:`~ensdiv.chapters.packed_ensembles.plateau_budget`) says Table 1's budget is converged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from torch import nn

from ensdiv.chapters.packed_ensembles.budget import RECORD, curve_with_record, plateau_budget, plateau_sentence
from ensdiv.chapters.packed_ensembles.methods import METHOD_LABELS
from ensdiv.errors import InvalidInputError
from ensdiv.models.packed_resnet import packed_resnet

__all__ = ["Premise", "CAPACITY_CITE", "CONVERGED_CITE", "narrowest_group", "capacity_premise",
           "converged_premise", "converged_for", "unmet", "premise_facts"]

CAPACITY_CITE = ("§4 Results: 'ResNet-18 architecture does not have enough representation capacity to be divided "
                 "into subnetworks for CIFAR-100 ... given a sufficiently large network, Packed-Ensembles is able to "
                 "match Deep Ensembles'")
CONVERGED_CITE = ("§4 Metrics: 'the final trained model is the one with the highest accuracy', on the schedules "
                  "of Table 4")


@dataclass(frozen=True)
class Premise:
    """One premise of a claim: its ``name``, whether this run ``met`` it, what was ``measured`` (facts shown on the
    page), the paper's sentence that states it (``cites``) and, when unmet, ``why`` in one phrase."""

    name: str
    met: bool
    measured: dict[str, Any] = field(default_factory=dict)
    cites: str = ""
    why: str = ""


def narrowest_group(model: nn.Module) -> int:
    """Input channels of the narrowest group of ``model``'s convolutions after the first (the stem, a full
    convolution in every method): ``in_channels // groups``, the width one member's filter sees.

    >>> narrowest_group(nn.Sequential(nn.Conv2d(3, 32, 3), nn.Conv2d(32, 32, 3, groups=8), nn.Conv2d(32, 64, 1)))
    4
    """
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)][1:]
    if not convs:
        raise InvalidInputError(f"A {type(model).__name__} has no convolution after its stem to measure.")
    return min(c.in_channels // c.groups for c in convs)


def _relative(pe: nn.Module, single: nn.Module) -> float:
    return narrowest_group(pe) / narrowest_group(single)


def capacity_premise(pe: nn.Module, single: nn.Module, *, alpha: float, members: int, gamma: int) -> Premise:
    """Capacity: ``pe``'s narrowest group relative to ``single``'s narrowest convolution, against the same ratio
    for the paper's ResNet-18 PE-(``alpha``, ``members``, ``gamma``) in the reference layout (CIFAR-10's 10
    classes; the ratio does not depend on them)."""
    ours = _relative(pe, single)
    ref = _relative(packed_resnet("resnet18", alpha=alpha, num_estimators=members, gamma=gamma),
                    packed_resnet("resnet18", alpha=1, num_estimators=1, gamma=1))
    measured = {"PE narrowest group (channels)": narrowest_group(pe),
                "single model narrowest convolution (channels)": narrowest_group(single),
                "PE narrowest group / single model's": round(ours, 3),
                "paper's ResNet-18 PE: narrowest group / single model's": round(ref, 3)}
    why = (f"PE's narrowest group is {ours:.2f} of the single model's narrowest convolution, the paper's "
           f"ResNet-18 PE's {ref:.2f}: split finer than the setting where the paper finds PE close to DE")
    return Premise("capacity", ours >= ref, measured, CAPACITY_CITE, "" if ours >= ref else why)


def converged_premise(choice: dict[str, Any] | None, epochs: int, sentence: str = "") -> Premise:
    """Converged: the budget curve's plateau test (``choice``, :func:`plateau_budget`) at Table 1's ``epochs``;
    ``None`` (no curve: the paper preset runs the reference schedules) counts as met. ``sentence`` is
    :func:`plateau_sentence`'s, shown as the reason when unmet."""
    if choice is None:
        return Premise("converged", True, {"budget": "the reference schedule (no budget curve)"}, CONVERGED_CITE)
    met = bool(choice["converged"]) and epochs >= int(choice["epochs"])
    measured = {"Table 1 epochs": epochs, "plateau budget (epochs)": int(choice["epochs"]),
                "budget curve flattened": bool(choice["converged"])}
    return Premise("converged", met, measured, CONVERGED_CITE, "" if met else (sentence or "not converged"))


def converged_for(cfg: dict[str, Any], *, record: str = RECORD, tolerance: float = 1.0) -> Premise:
    """:func:`converged_premise` for a page that reads Table 1's models at ``cfg``'s budget (Table 2): the budget
    curve at ``cfg["epochs"]`` (its seed-0 single model and PE on the validation set, cache hits once Table 1's page
    ran) completed by the recorded curve (``record``, read where its recipe is ``cfg``'s). The paper preset runs the
    reference schedules (no curve): met."""
    if cfg["scale"] == "paper":
        return converged_premise(None, int(cfg["epochs"]))
    curve, _ = curve_with_record(cfg, epochs=[int(cfg["epochs"])], record=record)
    choice = plateau_budget(curve, tolerance=tolerance)
    sentence = plateau_sentence(choice, int(cfg["epochs"]), tolerance=tolerance, labels=METHOD_LABELS)
    return converged_premise(choice, int(cfg["epochs"]), sentence)


def unmet(premises: Sequence[Premise]) -> str:
    """The ``untestable`` text of a claim: each unmet premise, why, and the paper's sentence; ``""`` when every
    premise is met."""
    return "; ".join(f"premise '{p.name}' unmet: {p.why} ({p.cites})" for p in premises if not p.met)


def premise_facts(premises: Sequence[Premise]) -> dict[str, Any]:
    """Every premise's measured numbers and whether it was met, as facts of the claim."""
    out: dict[str, Any] = {}
    for p in premises:
        out.update({f"premise {p.name}: {k}": v for k, v in p.measured.items()})
        out[f"premise {p.name} met"] = p.met
    return out
