"""Cache bundles as trusted input (the reliability issue of the evidence wave, items 2 and 3): what a bundle
added is recorded and named on the pages that use it; a truncated archive, a failed download, a member larger
than its manifest says or under another key's folder is one sentence, nothing is left behind, and imported
entries get the permissions of any new file. Each test is named after its item."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tarfile
import tempfile
from pathlib import Path

import pytest

from ensdiv import bundles
from ensdiv.book import site
from ensdiv.errors import EnsdivError
from ensdiv.store import Store, config_key


def _bundle(tmp_path: Path, name: str = "b.tar") -> tuple[Path, Store, str]:
    src = Store(tmp_path / "src")
    path = src.save("kind", {"a": 1}, {"v": 1})
    rel = path.relative_to(src.root).as_posix()
    out = tmp_path / name
    bundles.export_bundle(src, [rel], out, scale="cpu")
    return out, Store(tmp_path / "dest"), rel


def _tar(path: Path, manifest_entries: list[dict], members: list[tuple[str, bytes]]) -> Path:
    manifest = json.dumps({"format": bundles.FORMAT, "scale": "cpu", "entries": manifest_entries}).encode()
    with tarfile.open(path, "w") as tar:
        for name, data in [("manifest.json", manifest), *members]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_an_import_is_recorded_with_its_bundle_scale_and_date(tmp_path):
    bundle, store, rel = _bundle(tmp_path)
    out = bundles.import_bundle(store, bundle)
    digest = hashlib.sha256(bundle.read_bytes()).hexdigest()
    assert (out["added"], out["scale"], out["bundle"]) == (1, "cpu", digest)
    record = bundles.imported_entries(store)
    assert set(record) == {rel} and record[rel]["bundle"] == digest and record[rel]["scale"] == "cpu"
    assert bundles.import_bundle(store, bundle)["added"] == 0  # nothing new: no second record
    assert len((store.root / bundles.IMPORTS).read_text().splitlines()) == 1


def test_a_page_that_used_an_imported_entry_says_so_in_its_verdict_box(tmp_path):
    bundle, store, rel = _bundle(tmp_path)
    bundles.import_bundle(store, bundle)
    imported = bundles.imported_entries(store)
    note = site._provenance([rel, "kind/00/" + "0" * 64 + ".pt"], imported)
    digest = hashlib.sha256(bundle.read_bytes()).hexdigest()[:12]
    assert note.startswith("**Provenance.** 1 of the cache entries this page used were imported, not computed here")
    assert f"bundle {digest} (cpu scale, imported " in note
    assert site._provenance(["kind/00/" + "0" * 64 + ".pt"], imported) == ""
    assert site._provenance(None, imported) == ""


def test_a_truncated_gzip_bundle_is_one_sentence_and_leaves_nothing(tmp_path):
    bundle, store, _ = _bundle(tmp_path, "b.tar.gz")
    data = bundle.read_bytes()
    bundle.write_bytes(data[: len(data) // 2])
    with pytest.raises(EnsdivError, match="is truncated or corrupt|is not a cache bundle") as err:
        bundles.import_bundle(store, bundle)
    assert "\n" not in str(err.value)
    assert not list(store.root.rglob("*.pt")) and not list(store.root.rglob("*.tmp"))


def test_a_gzip_stream_that_is_not_a_tar_is_one_sentence(tmp_path):
    bad = tmp_path / "x.tar.gz"
    bad.write_bytes(gzip.compress(b"not a tar archive at all" * 100))
    with pytest.raises(EnsdivError, match="not a cache bundle"):
        bundles.import_bundle(Store(tmp_path / "dest"), bad)


def test_a_failed_download_is_one_sentence_and_leaves_no_file(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    for url in ("http://127.0.0.1:9/bundle.tar", "http://nonexistent.invalid/bundle.tar"):
        with pytest.raises(EnsdivError, match="Could not download the cache bundle") as err:
            bundles.import_bundle(Store(tmp_path / "dest"), url)
        assert "\n" not in str(err.value)
    assert list((tmp_path / "tmp").iterdir()) == []
    assert bundles.DOWNLOAD_TIMEOUT == 60


def test_a_member_larger_than_its_manifest_says_is_refused_before_it_is_read(tmp_path, monkeypatch):
    _, store, rel = _bundle(tmp_path)
    raw = (tmp_path / "src" / rel).read_bytes()
    big = raw + b"\0" * 4096
    path = _tar(tmp_path / "big.tar", [{"path": rel, "sha256": hashlib.sha256(raw).hexdigest(), "bytes": len(raw)}],
                [(rel, big)])
    read = []
    real = tarfile.TarFile.extractfile
    monkeypatch.setattr(tarfile.TarFile, "extractfile",
                        lambda self, m: read.append(getattr(m, "name", m)) or real(self, m))
    with pytest.raises(EnsdivError, match=f"holds {len(big)} bytes where its manifest lists {len(raw)}"):
        bundles.import_bundle(store, path)
    assert read == ["manifest.json"]  # the member itself was never read


def test_a_member_under_another_keys_folder_is_refused(tmp_path):
    _, store, rel = _bundle(tmp_path)
    raw = (tmp_path / "src" / rel).read_bytes()
    key = Path(rel).stem
    wrong = f"kind/{'00' if key[:2] != '00' else '11'}/{key}.pt"
    path = _tar(tmp_path / "w.tar", [{"path": wrong, "sha256": hashlib.sha256(raw).hexdigest(), "bytes": len(raw)}],
                [(wrong, raw)])
    with pytest.raises(EnsdivError, match="is not under its key's folder"):
        bundles.import_bundle(store, path)
    assert not list(store.root.rglob("*.pt"))


def test_imported_entries_get_the_permissions_of_any_new_file(tmp_path, monkeypatch):
    from ensdiv import store as store_module

    bundle, store, rel = _bundle(tmp_path)
    monkeypatch.setattr(store_module, "_UMASK", 0o002)
    monkeypatch.setattr(bundles, "_umask", lambda: 0o002)
    bundles.import_bundle(store, bundle)
    assert (store.root / rel).stat().st_mode & 0o777 == 0o664
    assert store.load("kind", {"a": 1}) == {"v": 1}
    assert config_key({"a": 1}) == Path(rel).stem
    assert os.access(store.root / rel, os.R_OK)
