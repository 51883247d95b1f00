"""Write zcord/core/kinds.py: the kinds table weighted recall expands category words with
(issue 37 item 2): "what pet would Leo like" finds *would like a cat or a dog*, "我用的家电"
finds *洗衣机*.

English comes from Princeton WordNet 3.0 (the WordNet 3.0 licence, a permissive BSD-like
one, reproduced in the generated file), read from its database files: on Debian and Ubuntu
`apt-get install wordnet-base` puts them in /usr/share/wordnet; any directory holding
data.noun, index.noun and cntlist.rev will do. Chinese comes from tools/kinds_zh.txt,
written by hand for zcor under zcor's own licence. zcord itself reads only the generated
module; nothing is downloaded, at build time or at run time.

    .venv/bin/python tools/build_kinds_table.py [--wordnet /usr/share/wordnet]

What is taken from WordNet, for each noun whose commonest sense is in everyday use (tagged
at least MIN_CATEGORY times in WordNet's sense-tagged corpus, cntlist.rev):
- down: the nouns below that sense to depth 2 (a hyponym, a hyponym's hyponym), each tagged
  at least MIN_KIND times in the sense that puts it there, the commonest first, at most
  MAX_KINDS; a sense with more than MAX_BELOW synsets below it at that depth is too general
  to be a useful category (thing, person, act) and gives none;
- up: the nouns right above that sense, when they are tagged at least MIN_CATEGORY times in
  theirs and are not too general themselves (salmon → fish; other senses of a word would
  bring in what it rarely means: group → chlorine).
Both directions go into one list per word, a word never its own kind.
"""

from __future__ import annotations

import argparse
import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "zcord" / "core" / "kinds.py"
ZH = ROOT / "tools" / "kinds_zh.txt"
EN = ROOT / "tools" / "kinds_en.txt"
MIN_CATEGORY = 3     # a category noun's tag count in WordNet's corpus
MIN_KIND = 2         # a kind's, in the sense that makes it one
MAX_KINDS = 24
MAX_BELOW = 150
WORD = re.compile(r"^[a-z]+(?: [a-z]+)?$")  # one or two plain words

WORDNET_LICENSE = """WordNet Release 3.0. This software and database is being provided to you, the
LICENSEE, by Princeton University under the following license. By obtaining, using and/or
copying this software and database, you agree that you have read, understood, and will
comply with these terms and conditions.: Permission to use, copy, modify and distribute
this software and database and its documentation for any purpose and without fee or
royalty is hereby granted, provided that you agree to comply with the following copyright
notice and statements, including the disclaimer, and that the same appear on ALL copies of
the software, database and documentation, including modifications that you make for
internal use or for distribution. WordNet 3.0 Copyright 2006 by Princeton University. All
rights reserved. THIS SOFTWARE AND DATABASE IS PROVIDED "AS IS" AND PRINCETON UNIVERSITY
MAKES NO REPRESENTATIONS OR WARRANTIES, EXPRESS OR IMPLIED. BY WAY OF EXAMPLE, BUT NOT
LIMITATION, PRINCETON UNIVERSITY MAKES NO REPRESENTATIONS OR WARRANTIES OF MERCHANT-
ABILITY OR FITNESS FOR ANY PARTICULAR PURPOSE OR THAT THE USE OF THE LICENSED SOFTWARE,
DATABASE OR DOCUMENTATION WILL NOT INFRINGE ANY THIRD PARTY PATENTS, COPYRIGHTS,
TRADEMARKS OR OTHER RIGHTS. The name of Princeton University or Princeton may not be used
in advertising or publicity pertaining to distribution of the software and/or database.
Title to copyright in this software, database and any associated documentation shall at
all times remain with Princeton University and LICENSEE agrees to preserve same."""


def read_wordnet(where: Path):
    """(synsets: offset -> (lemmas, hypernyms, hyponyms), senses: lemma -> offsets by
    frequency, counts: lemma -> its tag count, sense_counts: (lemma, offset) -> tag count)."""
    synsets: dict[str, tuple[list[str], list[str], list[str]]] = {}
    for line in (where / "data.noun").read_text(encoding="latin-1").splitlines():
        if line.startswith(" "):
            continue
        f = line.split(" | ")[0].split()
        offset, n = f[0], int(f[3], 16)
        lemmas = [f[4 + 2 * k].lower().replace("_", " ") for k in range(n)]
        lemmas = [re.sub(r"\(.*\)$", "", w) for w in lemmas]
        p = 4 + 2 * n
        hypers, hypos = [], []
        for k in range(int(f[p])):
            sym, target, pos = f[p + 1 + 4 * k], f[p + 2 + 4 * k], f[p + 3 + 4 * k]
            if pos != "n":
                continue
            if sym == "@":
                hypers.append(target)
            elif sym == "~":
                hypos.append(target)
        synsets[offset] = (lemmas, hypers, hypos)
    senses: dict[str, list[str]] = {}
    for line in (where / "index.noun").read_text(encoding="latin-1").splitlines():
        if line.startswith(" "):
            continue
        f = line.split()
        n = int(f[2])
        senses[f[0].replace("_", " ")] = f[-n:]
    # sense keys (lemma%1:lexfile:lexid::) -> tag counts; resolve to offsets through index.sense
    # is not needed: index.noun lists senses commonest first, cntlist.rev numbers them
    counts: dict[str, int] = defaultdict(int)
    sense_counts: dict[tuple[str, int], int] = {}
    for line in (where / "cntlist.rev").read_text(encoding="latin-1").splitlines():
        key, num, cnt = line.split()
        lemma, _, rest = key.partition("%")
        if not rest.startswith("1:"):
            continue
        lemma = lemma.replace("_", " ")
        counts[lemma] += int(cnt)
        sense_counts[(lemma, int(num))] = int(cnt)
    return synsets, senses, counts, sense_counts


def english(where: Path) -> dict[str, list[str]]:
    synsets, senses, counts, sense_counts = read_wordnet(where)
    # how often a lemma was tagged in one synset: its sense number there is its place in index.noun
    used: dict[tuple[str, str], int] = {}
    for lemma, offsets in senses.items():
        for num, o in enumerate(offsets, 1):
            used[(lemma, o)] = sense_counts.get((lemma, num), 0)

    def below_of(offset: str) -> set[str]:
        below: set[str] = set()
        layer = [offset]
        for _depth in range(2):
            layer = [h for o in layer for h in synsets[o][2]]
            below.update(layer)
        return below

    out: dict[str, list[str]] = {}
    for word, offsets in senses.items():
        if not WORD.match(word) or used.get((word, offsets[0]), 0) < MIN_CATEGORY:
            continue
        kinds: dict[str, int] = {}
        below = below_of(offsets[0])
        if len(below) <= MAX_BELOW:
            for o in below:
                for lemma in synsets[o][0]:
                    c = used.get((lemma, o), 0)
                    if lemma != word and WORD.match(lemma) and c >= MIN_KIND:
                        kinds[lemma] = max(kinds.get(lemma, 0), c)
        down = sorted(kinds, key=lambda w: (-kinds[w], w))[:MAX_KINDS]
        up: dict[str, int] = {}
        for o in offsets[:1]:
            for h in synsets[o][1]:
                if len(below_of(h)) > MAX_BELOW:
                    continue  # too general a category to be one (person, someone)
                for lemma in synsets[h][0]:
                    c = used.get((lemma, h), 0)
                    if lemma != word and WORD.match(lemma) and c >= MIN_CATEGORY:
                        up[lemma] = max(up.get(lemma, 0), c)
        both = list(dict.fromkeys([*down, *sorted(up, key=lambda w: (-up[w], w))]))
        if both:
            out[word] = both
    return out


def by_hand(path: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        category, _, members = line.partition(":")
        category = category.strip()
        for m in [m.replace("_", " ") for m in members.split()]:
            if m != category:
                if m not in out[category]:
                    out[category].append(m)
                if category not in out[m]:
                    out[m].append(category)
    return dict(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wordnet", type=Path, default=Path("/usr/share/wordnet"),
                    help="the directory of WordNet 3.0's database files (Debian: wordnet-base)")
    ap.add_argument("--out", type=Path, default=OUT, help="where to write the module")
    args = ap.parse_args()
    write(args.wordnet, args.out)


def write(wordnet: Path, out: Path = OUT) -> None:
    """Build the table from WordNet's files in `wordnet` and the hand-written lists; write it to `out`."""
    en = english(wordnet)
    for word, kinds in by_hand(EN).items():
        en[word] = list(dict.fromkeys([*kinds, *en.get(word, [])]))
    zh = by_hand(ZH)
    table = {**en, **zh}
    lines = "\n".join(f"{w}\t{'|'.join(ks)}" for w, ks in sorted(table.items()))
    out.write_text(f'''"""Kinds for weighted recall (issue 37): a word -> the words that are a kind of it or that
it is a kind of ({len(en)} English words from Princeton WordNet 3.0, {len(zh)} Chinese words
from tools/kinds_zh.txt and a few English ones from tools/kinds_en.txt, written by hand for
zcor). Generated by tools/build_kinds_table.py;
do not edit by hand.

The English part is derived from WordNet 3.0, under its licence:

{WORDNET_LICENSE}
"""

TABLE = """\\
{lines}
"""
''', encoding="utf-8")
    print(f"wrote {out}: {len(en)} English and {len(zh)} Chinese words, {out.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
