"""One explicit fetch step for what can be fetched (``ensdiv fetch``); a run itself never downloads.

``ensdiv fetch weights <notebook | chapter>`` lists the pinned pretrained timm weights (``arch.tag``) that the
*paper* preset of a notebook — or of every notebook of a chapter — needs, says which are already in timm's
Hugging Face cache and how large the missing ones are, and downloads the missing ones through
``huggingface_hub`` into that cache (``--list`` only lists). A preset names pretrained models in its
``zoo``, ``hetero``, ``baseline``, ``backbone`` and ``new_model`` fields: ``sat69`` is the 69 models of
attack-similarity's SAT table, a SAT name resolves to its pinned tag
(:func:`ensdiv.models.paper.resolve_paper_name`), and an ``arch.tag`` timm knows is taken as it is; zoo keys
(``arch/resnet``) are trained, not fetched.

``ensdiv fetch data <set>`` downloads the paper-scale sets a library can download — CIFAR-10 / CIFAR-100
(torchvision's python batches) and SVHN (format 2 ``.mat`` files) — into ``$ENSDIV_DATA`` in the layout the
loaders read; for an ImageNet-family set it says where to get it and where to put it.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from ensdiv import chapters
from ensdiv.data.fashion import data_home
from ensdiv.errors import EnsdivError, UnknownNameError, unknown_name
from ensdiv.models.paper import resolve_paper_name, sat_model_names
from ensdiv.paths import project_root

__all__ = ["PRETRAINED_FIELDS", "FETCHABLE_SETS", "needed_weights", "weight_files", "fetch_weights", "fetch_data"]

#: The preset fields that name pretrained models at paper scale.
PRETRAINED_FIELDS = ("zoo", "hetero", "baseline", "backbone", "new_model")


def _notebooks(target: str) -> list[Path]:
    """The notebooks of ``target``: a notebook path (with or without ``.ipynb``), or a chapter's folder name."""
    root = project_root()
    chapter = root / "notebooks" / target
    if chapter.is_dir():
        return sorted(chapter.glob("*.ipynb"))
    for path in (Path(target), root / target):
        for p in (path, path.with_suffix(".ipynb")):
            if p.is_file() and p.suffix == ".ipynb":
                return [p]
    chapters_found = sorted(p.name for p in (root / "notebooks").iterdir() if p.is_dir())
    raise unknown_name("notebook or chapter", target, chapters_found)


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _strings(v)


def needed_weights(target: str) -> list[str]:
    """The pinned pretrained weights (``arch.tag``, sorted, each once) the paper presets of ``target`` need."""
    import timm

    known = set(timm.list_pretrained())
    sat = sat_model_names()
    found: set[str] = set()
    for nb in _notebooks(target):
        name = f"{nb.parent.name}/{nb.stem}"
        if name not in chapters.list_presets():
            continue
        cfg = chapters.preset(name, "paper", verbose=False)
        for field in PRETRAINED_FIELDS:
            for s in _strings(cfg.get(field)):
                names = sat if s == "sat69" else [s]
                for n in names:
                    if "/" in n:  # a zoo key: trained, not fetched
                        continue
                    try:
                        resolved = resolve_paper_name(n)
                    except UnknownNameError:
                        continue
                    if resolved in known:
                        found.add(resolved)
    return sorted(found)


def weight_files(name: str) -> tuple[str, str]:
    """``(hub repository, file)`` of timm's pretrained weights ``name`` (``arch.tag``) on the Hugging Face hub.

    Raises:
        EnsdivError: timm has no hub location for them (one sentence).
    """
    import timm

    cfg = timm.models.get_pretrained_cfg(name)
    repo = getattr(cfg, "hf_hub_id", None) if cfg is not None else None
    if not repo:
        raise EnsdivError(f"timm has no Hugging Face location for the weights {name}; fetch them as timm's docs say.")
    filename = getattr(cfg, "hf_hub_filename", None) or "model.safetensors"
    return repo.split("@")[0], filename


def _size(repo: str, filename: str) -> int | None:
    from huggingface_hub import get_hf_file_metadata, hf_hub_url

    try:
        return get_hf_file_metadata(hf_hub_url(repo, filename)).size
    except Exception:  # noqa: BLE001 - a size we cannot read is shown as unknown
        return None


def _cached(repo: str, filename: str) -> bool:
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(repo, filename), str)


def fetch_weights(target: str, *, download: bool = True, echo: Callable[[str], None] = print) -> dict[str, Any]:
    """List (and with ``download``, fetch into timm's Hugging Face cache) the weights ``target``'s paper presets
    need; the missing ones' sizes are read from the hub and shown before anything is downloaded.

    Returns:
        ``{"needed": [...], "cached": [...], "missing": [...], "bytes": total size of the missing ones or None,
        "downloaded": [...]}``.
    """
    from huggingface_hub import hf_hub_download

    needed = needed_weights(target)
    files = {n: weight_files(n) for n in needed}
    cached = [n for n in needed if _cached(*files[n])]
    missing = [n for n in needed if n not in cached]
    sizes = {n: _size(*files[n]) for n in missing}
    known = [s for s in sizes.values() if s is not None]
    total = sum(known) if len(known) == len(sizes) else None
    echo(f"{target}: {len(needed)} pretrained weights at paper scale, {len(cached)} already in the cache, "
         f"{len(missing)} to fetch" + (f" ({total / 2**20:.1f} MiB)" if total is not None else "") + ".")
    for n in missing:
        size = sizes[n]
        echo(f"  {n:<50} {'size unknown' if size is None else f'{size / 2**20:8.1f} MiB'}  {'/'.join(files[n])}")
    done = []
    if download:
        for n in missing:
            with _network(f"the Hugging Face hub ({'/'.join(files[n])})"):
                hf_hub_download(*files[n])
            done.append(n)
            echo(f"  fetched {n}")
    return {"needed": needed, "cached": cached, "missing": missing, "bytes": total, "downloaded": done}


@contextlib.contextmanager
def _network(where: str) -> Iterator[None]:
    """One sentence instead of a traceback when a download cannot reach its server."""
    try:
        yield
    except Exception as err:
        if not _unreachable(err):
            raise
        reason = getattr(err, "reason", None) or err
        raise EnsdivError(f"Cannot reach {where} ({reason}); ensdiv fetch needs internet, or put the files "
                          "where the loaders look for them (ensdiv fetch data lists the places).") from None


def _unreachable(err: BaseException) -> bool:
    """Whether ``err`` says the network or the server could not be reached (urllib, requests, httpx, the hub's
    offline error), as opposed to a local problem (a full disk, a permission) that keeps its own message."""
    import urllib.error

    kinds: list[type] = [urllib.error.URLError, ConnectionError, TimeoutError]
    for module, name in (("requests", "ConnectionError"), ("requests", "Timeout"), ("httpx", "TransportError"),
                         ("huggingface_hub.errors", "LocalEntryNotFoundError")):
        try:
            kinds.append(getattr(importlib.import_module(module), name))
        except (ImportError, AttributeError):
            continue
    return isinstance(err, tuple(kinds))


#: Sets ``ensdiv fetch data`` can download, -> (torchvision class name, the folder below $ENSDIV_DATA, splits).
FETCHABLE_SETS = {
    "cifar10": ("CIFAR10", "", ("train", "test")),
    "cifar100": ("CIFAR100", "", ("train", "test")),
    "svhn": ("SVHN", "svhn", ("train", "test")),
}
#: Sets a library cannot download: where to get them and where the loaders look for them.
_BY_HAND = {
    "imagenet": "https://image-net.org (ILSVRC2012): train/ and val/ in class folders (n01440764/...) below "
                "$ENSDIV_DATA/imagenet",
    "imagenet-v2": "https://github.com/modestyachts/ImageNetV2 (matched-frequency), below $ENSDIV_DATA/imagenet-v2",
    "imagenet-c": "https://github.com/hendrycks/robustness, below $ENSDIV_DATA/imagenet-c/<corruption>/<severity>",
    "imagenet-r": "https://github.com/hendrycks/imagenet-r, below $ENSDIV_DATA/imagenet-r",
    "imagenet-a": "https://github.com/hendrycks/natural-adv-examples, below $ENSDIV_DATA/imagenet-a",
    "imagenet-o": "https://github.com/hendrycks/natural-adv-examples, below $ENSDIV_DATA/imagenet-o",
}


def fetch_data(name: str, *, root: Path | None = None, echo: Callable[[str], None] = print) -> Path:
    """Download the set ``name`` (:data:`FETCHABLE_SETS`) with torchvision into ``root`` (default
    ``$ENSDIV_DATA``) in the layout the paper-scale loaders read; returns the folder.

    Raises:
        EnsdivError: the set must be fetched by hand (one sentence saying where from and where to), or is unknown.
    """
    if name in _BY_HAND:
        raise EnsdivError(f"{name} cannot be downloaded by a library: get it from {_BY_HAND[name]}.")
    if name not in FETCHABLE_SETS:
        raise unknown_name("fetchable set", name, [*FETCHABLE_SETS, *_BY_HAND])
    import torchvision.datasets as tvd

    cls, sub, splits = FETCHABLE_SETS[name]
    folder = Path(root or data_home()) / sub
    folder.mkdir(parents=True, exist_ok=True)
    for split in splits:
        kwargs = {"split": split} if cls == "SVHN" else {"train": split == "train"}
        with _network(f"the {name} download server"):
            getattr(tvd, cls)(str(folder), download=True, **kwargs)
        echo(f"{name}/{split} in {folder}")
    return folder
