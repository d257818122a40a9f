"""The locked environment (ensdiv.environment, requirements.lock, make setup / make lock): the installed packages
are the lock's, environment.yml is made from it, and the fingerprint that keys every result follows the lock."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest

from ensdiv import environment
from ensdiv.paths import project_root

ROOT = project_root()


def test_the_installed_environment_is_the_lock():
    """Every package of requirements.lock is installed at exactly its locked version (make setup installs the
    lock with --require-hashes): compared with importlib.metadata, not with ensdiv's own reading."""
    lock = ROOT / "requirements.lock"
    assert lock.is_file()
    pins = {}
    for line in lock.read_text().splitlines():
        if line and not line[0].isspace() and not line.startswith("#") and "==" in line:
            name, version = line.split("==", 1)
            pins[name.strip()] = version.split()[0].rstrip("\\").strip()
    assert len(pins) > 100 and {"torch", "torchvision", "timm", "numpy", "jupyter-book"} <= set(pins)
    wrong = {}
    for name, version in pins.items():
        try:
            have = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            have = None
        if have != version:
            wrong[name] = (version, have)
    assert not wrong, f"installed versions differ from requirements.lock (run make setup): {wrong}"
    assert environment.differences() == {}
    assert environment.describe().startswith("the locked environment")


def test_every_locked_package_has_a_hash():
    text = (ROOT / "requirements.lock").read_text()
    blocks = [b for b in text.split("\n") if b and not b[0].isspace() and not b.startswith("#")]
    assert blocks and all("==" in b and b.rstrip().endswith("\\") for b in blocks)  # a --hash line follows each
    assert text.count("--hash=sha256:") >= len(blocks)


def test_environment_yml_is_made_from_the_lock():
    """One source for the dependency list: environment.yml is what `make lock` writes from the lock."""
    assert (ROOT / "environment.yml").read_text() == environment.conda_environment(ROOT / "requirements.lock")


def test_pyproject_lists_what_the_lock_was_made_from():
    """The lock's header names the command make lock runs, and every dependency of pyproject.toml is locked."""
    import re

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+, which the lock is for
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = list(meta["dependencies"])
    for extra in ("book", "test", "attacks", "lock"):
        wanted += meta["optional-dependencies"][extra]
    locked = environment.locked_versions(ROOT / "requirements.lock")
    names = {re.split(r"[<>=!~\[; ]", w, maxsplit=1)[0].lower().replace("_", "-") for w in wanted}
    assert names - set(locked) == set()
    header = (ROOT / "requirements.lock").read_text().splitlines()[1]
    assert "--extra book --extra test --extra attacks --extra lock" in header


def test_the_fingerprint_follows_the_lock_and_names_departures(tmp_path, monkeypatch):
    """Hand-made locks: the same pins give the same fingerprint whatever the comments; another pin gives
    another; an installed version that departs from its pin is named."""
    a = tmp_path / "a.lock"
    a.write_text("numpy==1.0.0 \\\n    --hash=sha256:00\n    # via x\n")
    b = tmp_path / "b.lock"
    b.write_text("# another header\nnumpy==1.0.0 \\\n    --hash=sha256:00\n")
    c = tmp_path / "c.lock"
    c.write_text("numpy==1.0.1 \\\n    --hash=sha256:00\n")
    prints = {}
    for lock in (a, b, c):
        monkeypatch.setattr(environment, "lock_file", lambda lock=lock: lock)
        monkeypatch.setattr(environment, "_MEMO", {})
        prints[lock.name] = environment.fingerprint()
    assert prints["a.lock"] == prints["b.lock"] != prints["c.lock"]
    assert environment.locked_versions(c) == {"numpy": "1.0.1"}
    installed = importlib.metadata.version("numpy")
    assert environment.differences(c) == {"numpy": ("1.0.1", installed)}
    monkeypatch.setattr(environment, "lock_file", lambda: c)
    assert environment.describe() == f"departs from requirements.lock: numpy 1.0.1 -> {installed}"


@pytest.mark.parametrize("name", ["Scikit_Learn", "scikit.learn", "scikit-learn"])
def test_names_are_compared_normalised(tmp_path, name):
    lock = tmp_path / "l.lock"
    lock.write_text(f"{name}==9.9 \\\n")
    assert environment.locked_versions(Path(lock)) == {"scikit-learn": "9.9"}


def test_the_package_version_is_the_one_installed():
    import ensdiv

    assert ensdiv.__version__ == importlib.metadata.version("ensdiv")
