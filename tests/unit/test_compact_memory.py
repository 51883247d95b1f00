"""What the daemon keeps resident at 100,000 memories (bench/RESULTS.md, "Daemon RSS at
100,000 memories, round two"): the smaller forms answer as the larger ones did. A stem worked
out without the stemmer is not cached, a stemmed title word that is the word itself is the
title's own string, and the consolidation's queue of changed memories does not keep the
table it grew to."""

from __future__ import annotations

import sys

import zcord.core.text as text
from zcord.core.indexes import _word_keys


def test_only_stemmer_results_are_cached_and_every_stem_is_the_same(monkeypatch):
    monkeypatch.setattr(text, "_stem_cache", {})
    words = ["#1", "2026", "ab", "news", "went", "travelling", "studies", "longer", "咖啡", "iphone15"]
    first = [text.stem(w) for w in words]
    assert first == ["#1", "2026", "ab", "news", "go", "travel", "studi", "longer", "咖啡", "iphone15"]
    assert set(text._stem_cache) == {"travelling", "studies", "longer"}  # went: irregular, then too short
    assert [text.stem(w) for w in words] == first  # from the cache, the same


def test_a_title_word_its_stem_leaves_as_it_is_is_held_once(svc, t):
    t.write(title="bank 2026 loans", content="x")
    t.write(title="banks travelling 2026", content="y")
    ix = svc.state.indexes
    stems = dict(dict.items(ix.title_stems))
    assert {k: (v if isinstance(v, str) else set(v)) for k, v in stems.items()} == {
        "bank": {"m1", "m2"}, "2026": {"m1", "m2"}, "loan": "m1", "travel": "m2"}
    assert [ix.index[i].title_seq for i in ("m1", "m2")] == [("bank", "2026", "loan"), ("bank", "travell", "2026")]
    owned = {id(w) for i in ("m1", "m2") for w in ix.index[i].title_seq if w}
    assert {k for k in stems if id(k) in owned} == {"bank", "2026", "loan"}  # the titles' words, not copies
    assert all(_word_keys(ix.index[i]) <= set(dict.keys(ix.title_words)) for i in ("m1", "m2"))


def test_the_consolidation_queue_drops_the_table_it_grew_to(svc, t):
    for i in range(60):
        t.write(title=f"note {i}", content=f"distinct content number {i} " + "abcdefghij"[i % 10] * (i % 7))
    c = svc.consolidation
    svc.twins.ready()
    assert len(c.dirty) == 60
    grown = sys.getsizeof(c.dirty)
    while c.step(7):
        pass
    assert not c.dirty and sys.getsizeof(c.dirty) == sys.getsizeof({}) < grown
    t.write(title="note again", content="more")  # the queue still takes changes
    svc.twins.ready()
    assert list(c.dirty) == ["m61"]
