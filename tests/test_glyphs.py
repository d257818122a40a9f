"""pretrain/glyphs: deterministic, labelled (62 balanced classes), cached through the store."""

from __future__ import annotations

import pytest
import torch

import ensdiv as ed
from ensdiv.data import glyphs
from ensdiv.errors import EnsdivError


def test_glyphs_are_deterministic_and_labelled():
    x1, y1 = glyphs.render_glyphs(124, seed=3)
    x2, y2 = glyphs.render_glyphs(124, seed=3)
    x3, _ = glyphs.render_glyphs(124, seed=4)
    assert torch.equal(x1, x2) and torch.equal(y1, y2)
    assert not torch.equal(x1, x3)
    assert x1.shape == (124, 1, 28, 28) and x1.dtype == torch.uint8
    assert torch.equal(torch.bincount(y1, minlength=62), torch.full((62,), 2))
    assert glyphs.GLYPH_CLASSES[:3] == ["0", "1", "2"] and glyphs.GLYPH_CLASSES[10] == "A"
    assert glyphs.GLYPH_CLASSES[36] == "a" and len(set(glyphs.GLYPH_CLASSES)) == 62
    assert int(x1.amax()) > 100 and float(x1.float().mean()) < 80  # bright strokes on a dark background


def test_every_font_draws_the_62_characters():
    fonts = glyphs.glyph_fonts()
    assert len(fonts) >= 10 and all(f.suffix == ".ttf" for f in fonts)
    assert [f.name for f in fonts] == sorted(f.name for f in fonts)


def test_glyphs_are_cached_through_the_store(tmp_store, monkeypatch):
    first = glyphs.load_glyphs(62, seed=1)
    assert len(tmp_store.entries("datasets")) == 1

    def boom(*args, **kwargs):
        raise AssertionError("rendered again instead of read from the cache")

    monkeypatch.setattr(glyphs, "render_glyphs", boom)
    second = glyphs.load_glyphs(62, seed=1)
    assert torch.equal(first.x, second.x) and torch.equal(first.y, second.y)
    assert first.num_classes == 62 and first.name == "pretrain/glyphs"
    assert 0.0 <= float(first.x.min()) and float(first.x.max()) <= 1.0


def test_registered_and_bad_size():
    assert "pretrain/glyphs" in ed.data.dataset_names()
    assert {"pretrain/shapes", "pretrain/digits"} <= set(ed.data.dataset_names())
    with pytest.raises(EnsdivError, match="at least one image per class"):
        glyphs.render_glyphs(10)
