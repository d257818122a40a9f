"""``ensdiv fetch`` (#33 item 5): the weights a paper preset needs, listed with sizes before anything is fetched,
fetched through a mocked hub; the sets a library can download, through mocked torchvision classes."""

from __future__ import annotations

import pytest

from ensdiv.book import cli, fetch
from ensdiv.errors import EnsdivError, UnknownNameError

G1 = ["coat_lite_small.in1k", "lamhalobotnet50ts_256.a1h_in1k", "nfnet_l0.ra2_in1k", "resnet101.a1h_in1k",
      "rexnet_150.nav_in1k", "swin_tiny_patch4_window7_224.ms_in1k", "twins_pcpvt_base.in1k",
      "vit_small_patch16_224.augreg_in21k_ft_in1k"]


def test_the_weights_a_paper_preset_needs():
    """Fig. G.1's paper preset: the paper's 8 models, pinned; the SAT chapter: its 69 models and Fig. G.2's Gluon
    ResNeXt-50; SED: its DeiT3-B backbone; Packed-Ensembles trains every model (nothing to fetch)."""
    assert fetch.needed_weights("notebooks/attack-similarity/figG1_attack_choice.ipynb") == G1
    sat = fetch.needed_weights("attack-similarity")
    assert len(sat) == 70 and "resnext50_32x4d.gluon_in1k" in sat
    assert fetch.needed_weights("sed") == ["deit3_base_patch16_224.fb_in22k_ft_in1k"]
    assert fetch.needed_weights("packed-ensembles") == []
    with pytest.raises(UnknownNameError, match="notebook or chapter"):
        fetch.needed_weights("attack-similarty")


def test_fetch_lists_sizes_then_downloads_only_what_is_missing(monkeypatch):
    import huggingface_hub

    cached = {"timm/coat_lite_small.in1k"}
    got, lines = [], []
    monkeypatch.setattr(fetch, "_cached", lambda repo, filename: repo in cached)
    monkeypatch.setattr(fetch, "_size", lambda repo, filename: 2**20)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", lambda repo, filename: got.append((repo, filename)))
    target = "notebooks/attack-similarity/figG1_attack_choice.ipynb"
    listed = fetch.fetch_weights(target, download=False, echo=lines.append)
    assert got == [] and listed["cached"] == ["coat_lite_small.in1k"] and len(listed["missing"]) == 7
    assert listed["bytes"] == 7 * 2**20 and "7 to fetch (7.0 MiB)" in lines[0]
    out = fetch.fetch_weights(target, echo=lines.append)
    assert out["downloaded"] == out["missing"] and len(got) == 7
    assert ("timm/rexnet_150.nav_in1k", "model.safetensors") in got
    # a size the hub does not give is shown as unknown, and the total too
    monkeypatch.setattr(fetch, "_size", lambda repo, filename: None)
    assert fetch.fetch_weights(target, download=False, echo=lines.append)["bytes"] is None
    assert any("size unknown" in line for line in lines)


def test_fetch_data_uses_torchvision_into_the_layout_the_loaders_read(tmp_path, monkeypatch):
    import torchvision.datasets as tvd

    calls = []

    def fake(cls):
        def make(root, download=False, **kw):
            calls.append((cls, root, download, kw))
        return make

    for cls in ("CIFAR10", "CIFAR100", "SVHN"):
        monkeypatch.setattr(tvd, cls, fake(cls))
    monkeypatch.setenv("ENSDIV_DATA", str(tmp_path))
    assert fetch.fetch_data("cifar10", echo=lambda s: None) == tmp_path
    assert fetch.fetch_data("svhn", echo=lambda s: None) == tmp_path / "svhn"
    assert calls == [("CIFAR10", str(tmp_path), True, {"train": True}),
                     ("CIFAR10", str(tmp_path), True, {"train": False}),
                     ("SVHN", str(tmp_path / "svhn"), True, {"split": "train"}),
                     ("SVHN", str(tmp_path / "svhn"), True, {"split": "test"})]
    with pytest.raises(EnsdivError, match="cannot be downloaded by a library: get it from https://image-net.org"):
        fetch.fetch_data("imagenet")
    with pytest.raises(UnknownNameError, match="fetchable set"):
        fetch.fetch_data("mnist")


def test_the_fetch_command(monkeypatch, capsys):
    monkeypatch.setattr(fetch, "_cached", lambda repo, filename: True)
    assert cli.main(["fetch", "weights", "sed", "--list"]) == 0
    assert "1 pretrained weights at paper scale, 1 already in the cache, 0 to fetch" in capsys.readouterr().out
    assert cli.main(["fetch", "data", "imagenet-r"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ensdiv: imagenet-r cannot be downloaded") and err.count("\n") == 1


def test_fetch_without_network_is_one_sentence(tmp_path, monkeypatch, capsys):
    """No network: the hub's offline error, a requests connection error and urllib's URLError each give one
    sentence and exit status 2; a local error (a full disk, a permission) keeps its own message."""
    import urllib.error

    import huggingface_hub
    import requests
    import torchvision.datasets as tvd
    from huggingface_hub.errors import LocalEntryNotFoundError

    monkeypatch.setattr(fetch, "_cached", lambda repo, filename: False)
    monkeypatch.setattr(fetch, "_size", lambda repo, filename: None)
    for error in (LocalEntryNotFoundError("offline"), requests.ConnectionError("no route to host")):
        def offline(repo, filename, error=error):
            raise error

        monkeypatch.setattr(huggingface_hub, "hf_hub_download", offline)
        with pytest.raises(EnsdivError, match=r"^Cannot reach the Hugging Face hub \(timm/.*fetch needs internet"):
            fetch.fetch_weights("sed", echo=lambda s: None)
    assert cli.main(["fetch", "weights", "sed"]) == 2
    assert capsys.readouterr().err.count("\n") == 1

    def unreachable(root, download=False, **kw):
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(tvd, "CIFAR10", unreachable)
    monkeypatch.setenv("ENSDIV_DATA", str(tmp_path))
    with pytest.raises(EnsdivError, match="^Cannot reach the cifar10 download server .*name resolution"):
        fetch.fetch_data("cifar10", echo=lambda s: None)

    def full(root, download=False, **kw):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tvd, "CIFAR10", full)
    with pytest.raises(OSError, match="No space left"):
        fetch.fetch_data("cifar10", echo=lambda s: None)
