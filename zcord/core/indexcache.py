"""memory-state.recall.cache: the retrieval indexes of the snapshot's memories, so that a
start loads them instead of building them (5.6 CPU seconds at 100,000 memories).

Derived the way memory-state.cache is (zcord.core.nodecache), and bound to it: the snapshot
writer writes it right after the node cache, from the same state, and its header holds the
node cache's own header (the state file's device, inode, size, modification time and
checksums, the nodes' checksum). A start uses it only when the memories were read from that
very node cache, and when it was made by the same rules (`fingerprint`: this layout, the
text-folding rules `FOLDING_VERSION`, the Unicode tables behind NFKC and case folding, the
ranks' spacing and the postings' layout, the source of the code that builds the indexes); then the changes replayed from the journal update
the loaded indexes as they update built ones. Anything else (missing, garbage, truncated, a
symbolic link, another Memory's, left from an older snapshot or by a killed writer, other
rules) is ignored and the indexes are built as before. It holds nothing the state file does
not imply, so deleting it is always safe.

What it holds (`_encode`): per node in state-file order its NodeIndex as columns (the
normalized title only when it differs from the title), the four postings tables with nodes
given by their position in the file (one, a few, or an array of loaded ranks), the mixed
keywords, the counts, and the normalized keywords of the current nodes (the words a start
teaches jieba: `indexed_keywords`). Synonyms do not feed these indexes; jieba's
dictionary does not either (it is cached on its own: zcord.core.text.jieba_cache_path).

Layout: a magic line, one JSON line (fingerprint, the node cache's header, counts, payload
checksum), then a marshal'd tuple (plain containers of str, int, float, bytes, None).
"""

from __future__ import annotations

import json
import logging
import marshal
import os
import sys
import unicodedata
import zlib
from array import array
from pathlib import Path
from typing import Any

from .fsutil import atomic_write, read_derived
from .indexes import _LENGTHS, BIG_POSTING, NodeIndex, Postings
from .text import FOLDING_VERSION

log = logging.getLogger(__name__)

CACHE_FILE = "memory-state.recall.cache"
MAGIC = b"zcor memory-state.recall.cache 1\n"
FORMAT = 2
"""2: the stemmed tables of weighted recall. Bump when what this file holds, or how, changes."""


COVERED = ("index", "title_grams", "title_words", "keyword_ids", "title_keys", "title_stems", "keyword_stems",
           "title_stem_keys", "stem_count", "mixed_keywords", "current_count", "title_len_sum", "pending_words",
           "unindexed", "unindexed_at")
"""The attributes of RetrievalIndexes this file restores (besides the state's nodes and
ranks): one added there must be added here too (tests/unit/test_indexcache.py checks)."""


def fingerprint() -> dict[str, Any]:
    """Everything the cached indexes depend on besides the memories themselves: this
    layout, the folding rules' version, the Unicode tables, the Python version, the ranks'
    spacing and the postings' layout, and the source of the code that builds the indexes
    (zcord/core/text.py and indexes.py: any change there rebuilds them once)."""
    from .state import RANK_GAP

    return {"format": FORMAT, "folding": FOLDING_VERSION, "unicode": unicodedata.unidata_version,
            "python": list(sys.version_info[:2]), "rankGap": RANK_GAP, "bigPosting": BIG_POSTING,
            "code": _code_crc()}


_code: list[int | None] = []


def _code_crc() -> int | None:
    if not _code:
        from . import indexes, text

        crc = 0
        try:
            for module in (text, indexes):
                with open(module.__file__ or "", "rb") as f:
                    crc = zlib.crc32(f.read(), crc)
        except (OSError, TypeError):
            _code.append(None)
        else:
            _code.append(crc)
    return _code[0]


def cache_path(memdir: Path) -> Path:
    return memdir / CACHE_FILE


def remove(memdir: Path) -> None:
    try:
        os.unlink(cache_path(memdir))
    except FileNotFoundError:
        pass


def write(memdir: Path, state: Any, node_header: dict[str, Any] | None) -> None:
    """Write the cache for the snapshot just written from `state` (node_header: the node
    cache written with it; None when there is none), or remove an old one when there is
    nothing to bind to or the state's indexes are not built. Never raises: the next start
    builds the indexes."""
    try:
        if node_header is None or not getattr(state, "indexed", False) or len(state.index) != len(state.nodes):
            remove(memdir)
            return
        payload = marshal.dumps(_encode(state))
        header = {"fingerprint": fingerprint(), "nodes": node_header, "count": len(state.nodes),
                  "payloadCrc": zlib.crc32(payload)}
        atomic_write(cache_path(memdir), [MAGIC, json.dumps(header).encode() + b"\n", payload], sync=False)
    except (OSError, ValueError, KeyError, TypeError) as e:
        log.warning("could not write %s (%s); the next start builds the retrieval indexes", CACHE_FILE,
                    getattr(e, "strerror", None) or e)
        try:
            remove(memdir)
        except OSError:
            pass


def _encode(state: Any) -> tuple[Any, ...]:
    """Columns that decode in C loops: per node (file order) its updated time and title
    length (doubles), normalized title (None: the title itself) and folded words; per table
    the terms held by one node (terms, positions), by a few (term, positions) and by many
    (term, loaded ranks as bytes); whole titles held by one node whose key is its normalized
    title by position only."""
    from .state import RANK_GAP

    ids = list(state.nodes)  # state-file order (the order the snapshot writer wrote them in)
    pos = {node_id: i for i, node_id in enumerate(ids)}
    new_rank = {state.rank[node_id]: RANK_GAP * (i + 1) for i, node_id in enumerate(ids)}
    nodes, index = state.nodes, state.index
    rows = [index[node_id] for node_id in ids]
    columns = (array("d", [x.updated for x in rows]).tobytes(), array("d", [x.title_len for x in rows]).tobytes(),
               [None if x.norm_title == nodes[i].title else x.norm_title for i, x in zip(ids, rows)],
               [x.title_seq for x in rows])

    def table_of(table: Any, own_titles: bool = False) -> tuple[Any, ...]:
        one_keys, one_pos, few, many, titled = [], [], [], [], []
        for k, v in dict.items(table):
            t = type(v)
            if t is str:
                if own_titles and k == index[v].norm_title:
                    titled.append(pos[v])  # the key is that node's normalized title: one string, not two
                else:
                    one_keys.append(k)
                    one_pos.append(pos[v])
            elif t is set:
                few.append((k, tuple(sorted(pos[i] for i in v))))
            else:
                many.append((k, array("I", sorted(new_rank[r] for r in v)).tobytes()))
        return one_keys, array("I", one_pos).tobytes(), few, many, array("I", titled).tobytes()

    tables = tuple(table_of(t, t is state.title_keys) for t in
                   (state.title_grams, state.title_words, state.keyword_ids, state.title_keys,
                    state.title_stems, state.keyword_stems, state.title_stem_keys))
    return (columns, tables, dict(state.mixed_keywords), state.current_count, state.title_len_sum,
            state.indexed_keywords(), state.stem_count)


def read(memdir: Path, state: Any, node_header: dict[str, Any] | None) -> bool:
    """Fill a just-loaded state's retrieval indexes from the cache, when the state was read
    from the node cache whose header is node_header and the cache belongs to it and to these
    rules; False (the state untouched) otherwise. Never raises."""
    if node_header is None or not state.nodes or state.indexed:
        return False
    got = read_derived(cache_path(memdir), MAGIC)
    if got is None:
        return False
    header, payload = got
    try:
        if header["fingerprint"] != fingerprint() or header["nodes"] != node_header or \
                header["count"] != len(state.nodes):
            return False
        return _decode(state, marshal.loads(payload))
    except (OSError, ValueError, KeyError, TypeError, EOFError, IndexError, AttributeError):
        return False


def _decode(state: Any, data: tuple[Any, ...]) -> bool:
    from .state import RANK_GAP

    (updated, lengths, norms, seqs), tables, mixed, count, len_sum, taught, stem_count = data
    if len(tables) != 7:
        return False
    ids = list(state.nodes)
    updated, lengths = _doubles(updated), _doubles(lengths)
    if not len(updated) == len(lengths) == len(norms) == len(seqs) == len(ids) or \
            state.rank[ids[0]] != RANK_GAP or state.rank[ids[-1]] != RANK_GAP * len(ids):
        return False
    nodes = state.nodes
    shared = _LENGTHS
    titles = [nodes[i].title if n is None else n for i, n in zip(ids, norms)]
    index = dict(zip(ids, map(NodeIndex, updated, [shared.setdefault(x, x) for x in lengths], titles, seqs)))
    by_rank, rank = state._by_rank, state.rank
    made = []
    for one_keys, one_pos, few, many, titled in tables:
        table = Postings(by_rank, rank)
        dict.update(table, zip(one_keys, map(ids.__getitem__, _uints(one_pos)), strict=True))
        for k, v in few:
            table[k] = set(map(ids.__getitem__, v))
        for k, v in many:
            ranks = array("I")
            ranks.frombytes(v)
            if len(ranks) <= BIG_POSTING // 2:
                raise ValueError("a short rank array")
            table[k] = ranks
        titled = _uints(titled)
        dict.update(table, zip(map(titles.__getitem__, titled), map(ids.__getitem__, titled)))
        made.append(table)
    # every piece decoded: now the state's indexes take them all at once
    ix = state.indexes
    ix.index = index
    (ix.title_grams, ix.title_words, ix.keyword_ids, ix.title_keys,
     ix.title_stems, ix.keyword_stems, ix.title_stem_keys) = made
    ix.stem_count = stem_count
    ix.mixed_keywords = mixed
    ix.current_count = count
    ix.title_len_sum = len_sum
    ix.pending_words = list(taught)
    ix.unindexed = None
    ix.unindexed_at = 0
    ix.generation += 1  # whatever was derived from the titles before is stale
    return True


def _doubles(raw: bytes) -> list[float]:
    out = array("d")
    out.frombytes(raw)
    return out.tolist()


def _uints(raw: bytes) -> list[int]:
    out = array("I")
    out.frombytes(raw)
    return out.tolist()
