"""Training many recipes in worker processes: dependencies first, shared backbones once, all cached."""

from __future__ import annotations

import pytest

import ensdiv as ed
from ensdiv.errors import InvalidInputError
from ensdiv.workers import build_many


def _recipes():
    base = ed.Recipe.make(model="test_cnn", epochs=1, batch_size=64, train_subset=128)
    teacher = base.replace(seed=1, name="teacher")
    student = base.replace(method=ed.Distill(teacher=teacher), seed=2, name="student")
    simclr = ed.Pretrain(objective="simclr", epochs=1, seed=0)
    probes = [base.replace(method=simclr, seed=s, augment="none", name=f"probe{s}") for s in (3, 4)]
    return [student, *probes, teacher]  # the student is listed before its teacher on purpose


@pytest.mark.slow
def test_two_workers_train_each_model_once_teacher_first(tmp_path):
    store = ed.Store(tmp_path)
    finished = []
    times = build_many(_recipes(), "fmnist/test", workers=2, store=store,
                       on_done=lambda r, s: finished.append(r.label))
    assert set(times) == {"student", "probe3", "probe4", "teacher"}
    assert finished.index("teacher") < finished.index("student")
    assert len(store.entries("model")) == 4
    assert len(store.entries("pretrained")) == 1  # the two probes share one SimCLR backbone
    for r in _recipes():
        assert ed.cached_predictions(r, "fmnist/test", store=store).shape == (10000, 10)


def test_one_worker_builds_in_process(tmp_path):
    store = ed.Store(tmp_path)
    r = ed.Recipe.make(model="test_mlp", epochs=1, batch_size=64, train_subset=64)
    assert list(build_many([r], "fmnist/test", workers=1, store=store)) == [r.label]
    assert ed.cached_predictions(r, "fmnist/test", store=store) is not None


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
def test_bad_worker_count_is_one_sentence(bad):
    with pytest.raises(InvalidInputError, match="workers must be an integer >= 1"):
        build_many([], "fmnist/test", workers=bad)
