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


def test_an_imported_entry_recomputed_here_is_no_longer_the_bundles(tmp_path):
    """An entry the store took from a bundle and later recomputed (its code changed, say) holds this machine's
    bytes: no page that uses it is told its numbers are the bundle's. Before, the record was keyed by path for
    ever."""
    bundle, store, rel = _bundle(tmp_path)
    bundles.import_bundle(store, bundle)
    assert set(bundles.imported_entries(store)) == {rel}
    store.save("kind", {"a": 1}, {"v": 2})  # recomputed here: the same path, other bytes
    assert bundles.imported_entries(store) == {}
    (store.root / rel).unlink()
    assert bundles.imported_entries(store) == {}


def test_a_page_without_claims_shows_its_provenance_too(tmp_path):
    from ensdiv.report import PageRun

    executed = tmp_path / "x.ipynb"
    executed.write_text(json.dumps({"cells": [{"cell_type": "markdown", "metadata": {}, "source": "# A page"}],
                                    "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    out = site._present(executed, PageRun("notebooks/x.ipynb", "ok"), tmp_path / "out.ipynb",
                        provenance="**Provenance.** 1 of the cache entries")
    cells = json.loads(out.read_text())["cells"]
    assert any("**Provenance.** 1 of the cache entries" in "".join(c["source"]) for c in cells)


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


def _zeros_bundle(path: Path, mib: int) -> Path:
    """A gzip bomb with a consistent manifest: one store-path member of ``mib`` MiB of zeros (its true size and
    SHA-256 listed), streamed into the archive without holding it."""
    rel = "kind/ab/" + "ab" * 32 + ".pt"
    h = hashlib.sha256()
    chunk = bytes(2**20)
    for _ in range(mib):
        h.update(chunk)
    manifest = json.dumps({"format": bundles.FORMAT, "scale": "cpu",
                           "entries": [{"path": rel, "sha256": h.hexdigest(), "bytes": mib * 2**20}]}).encode()

    class Zeros(io.RawIOBase):
        left = mib * 2**20

        def readable(self):
            return True

        def readinto(self, b):
            n = min(len(b), self.left)
            b[:n] = bytes(n)
            self.left -= n
            return n

    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo("manifest.json")
        info.size = len(manifest)
        tar.addfile(info, io.BytesIO(manifest))
        info = tarfile.TarInfo(rel)
        info.size = mib * 2**20
        tar.addfile(info, io.BufferedReader(Zeros()))
    return path


@pytest.mark.slow
def test_a_gzip_bomb_with_a_consistent_manifest_is_refused_after_one_chunk_in_bounded_memory(tmp_path):
    """The probe's bomb, at 256 MiB: refused on its first chunk (no entry header), nothing left in the store, and
    the importing process grows by far less than the member (it used to read it whole, twice)."""
    import subprocess
    import sys

    bomb = _zeros_bundle(tmp_path / "bomb.tar.gz", 256)
    assert bomb.stat().st_size < 2 * 2**20
    code = ("import resource, sys\nfrom ensdiv import bundles\nfrom ensdiv.store import Store\n"
            "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
            "try:\n    bundles.import_bundle(Store(sys.argv[2]), sys.argv[1])\n"
            "except Exception as exc:\n    print(type(exc).__name__, exc)\n"
            "print('grew_kib', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)\n")
    env = {**os.environ, "PYTHONPATH": str(Path(bundles.__file__).parents[1])}  # this checkout's package
    out = subprocess.run([sys.executable, "-c", code, str(bomb), str(tmp_path / "dest")], capture_output=True,
                         text=True, check=True, env=env)
    assert "EnsdivError" in out.stdout and "does not start with a store entry's header" in out.stdout, out.stdout
    grew = int(out.stdout.split("grew_kib")[1])
    assert grew < 64 * 1024, f"the import grew by {grew} KiB for a 256 MiB member"
    assert not [p for p in (tmp_path / "dest").rglob("*") if p.is_file()]


def test_a_member_over_the_entry_cap_is_refused_before_it_is_read(tmp_path):
    bundle, store, rel = _bundle(tmp_path)
    size = json.loads(tarfile.open(bundle).extractfile("manifest.json").read())["entries"][0]["bytes"]
    with pytest.raises(EnsdivError, match=rf"is {size} bytes, over the largest entry an import accepts \(100;"):
        bundles.import_bundle(store, bundle, max_entry_bytes=100)
    assert not [p for p in store.root.rglob("*") if p.is_file()]
    assert bundles.import_bundle(store, bundle, max_entry_bytes=size)["added"] == 1  # at the cap: accepted
    with pytest.raises(EnsdivError, match="at least 1 byte"):
        bundles.import_bundle(store, bundle, max_entry_bytes=0)


def test_a_member_larger_than_the_free_space_is_refused_in_one_sentence(tmp_path, monkeypatch):
    bundle, store, _ = _bundle(tmp_path)
    from collections import namedtuple

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(bundles.shutil, "disk_usage", lambda path: usage(10**9, 10**9 - 10, 10))
    with pytest.raises(EnsdivError, match=r"needs \d+ bytes and .* has 10 free; nothing was imported") as err:
        bundles.import_bundle(store, bundle)
    assert "\n" not in str(err.value)
    assert not list(store.root.rglob("*.pt")) and not list(store.root.rglob("*.tmp"))


def test_an_entry_whose_header_checksum_does_not_hold_is_refused(tmp_path):
    """A member with the store's header but a body that does not match it (its manifest consistent with it)."""
    body = b"not the body the header hashes"
    data = b"ensdiv-store-v1 " + b"0" * 64 + b"\n" + body
    rel = "kind/cd/" + "cd" * 32 + ".pt"
    bad = _tar(tmp_path / "h.tar", [{"path": rel, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}],
               [(rel, data)])
    store = Store(tmp_path / "dest")
    with pytest.raises(EnsdivError, match="its own header checksum does not hold"):
        bundles.import_bundle(store, bad)
    assert not list(store.root.rglob("*.pt")) and not list(store.root.rglob("*.tmp"))


def test_a_listed_member_that_is_a_link_is_refused_as_a_link(tmp_path):
    rel = "kind/ab/" + "ab" * 32 + ".pt"
    entry = [{"path": rel, "sha256": "0" * 64, "bytes": 0}]
    for kind, make in (("a symbolic link", tarfile.SYMTYPE), ("a hard link", tarfile.LNKTYPE)):
        path = tmp_path / "link.tar"
        manifest = json.dumps({"format": bundles.FORMAT, "scale": "cpu", "entries": entry}).encode()
        with tarfile.open(path, "w") as tar:
            info = tarfile.TarInfo("manifest.json")
            info.size = len(manifest)
            tar.addfile(info, io.BytesIO(manifest))
            link = tarfile.TarInfo(rel)
            link.type, link.linkname = make, "manifest.json"
            tar.addfile(link)
        store = Store(tmp_path / "dest")
        with pytest.raises(EnsdivError, match=f"is {kind}, and a store entry is a regular file"):
            bundles.import_bundle(store, path)
        assert not list(store.root.rglob("*.pt"))


def test_an_export_to_a_full_disk_is_one_sentence_and_leaves_no_partial_bundle(tmp_path, monkeypatch):
    import errno

    src = Store(tmp_path / "src")
    rel = src.save("kind", {"a": 1}, {"v": 1}).relative_to(src.root).as_posix()

    def full(self, info, fileobj=None):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(tarfile.TarFile, "addfile", full)
    out = tmp_path / "x.tar"
    with pytest.raises(EnsdivError, match=r"Could not write the bundle .*x\.tar \(No space left on device\)") as err:
        bundles.export_bundle(src, [rel], out, scale="cpu")
    assert "\n" not in str(err.value)
    assert not out.exists() and not (tmp_path / "x.tar.partial").exists()


def test_the_claims_page_names_the_bundles_a_page_used(tmp_path):
    """Before, provenance showed only in a page's verdict box, never on the claims page."""
    from ensdiv.report import PageRun, claims_page

    bundle, store, rel = _bundle(tmp_path)
    bundles.import_bundle(store, bundle)
    imported = bundles.imported_entries(store)
    digest = hashlib.sha256(bundle.read_bytes()).hexdigest()[:12]
    note = site._row_note({"params": {"scale": "cpu"}}, [rel], imported)
    assert note.startswith(f"1 cache entry imported from bundle {digest} (cpu scale, imported ")
    explored = site._row_note({"params": {"scale": "cpu", "epochs": 2}}, [rel], imported)
    assert explored == f"run with `-p epochs 2`; {note}"
    assert site._row_note({"params": {"scale": "cpu"}}, ["kind/00/" + "0" * 64 + ".pt"], imported) == ""
    page = claims_page("cpu", [PageRun("notebooks/foundations/x.ipynb", "ok", note=note)])
    assert f"1 cache entry imported from bundle {digest}" in page
