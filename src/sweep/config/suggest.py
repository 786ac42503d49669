"""What a misspelt name was likely meant to be: the names closest to it (difflib's ratio), said as
"did you mean ...?" before the list of names there are. A leaf module: the checks and the preflight use it."""

from __future__ import annotations

import difflib
from typing import Iterable

# a word meant as a name it does not resemble: `device=gpu` was "did you mean cpu?", the one device that is no GPU
MEANT = {"gpu": "cuda"}


def closest(word: str, names: Iterable[str], n: int = 2) -> list[str]:
    """Up to `n` of `names` closest to `word` (none when nothing is close); a word of MEANT, its name first."""
    names = list(names)
    meant = MEANT.get(word.lower())
    if meant in names:
        return [meant]
    folded = {}  # lower case -> the name: `tracker.scope=ALL_STEPS` or `method=SGD` is its name, typed in capitals
    for name in names:
        folded.setdefault(name.lower(), name)
    if word.lower() in folded and folded[word.lower()] != word:
        return [folded[word.lower()]]
    return [folded[m] for m in difflib.get_close_matches(word.lower(), list(folded), n=n, cutoff=0.5)]


def expected(word: str, names: Iterable[str]) -> str:
    """'did you mean a? expected one of a, b, c' (without the question when no name is close)."""
    names = sorted(set(names))
    near = closest(word, names)
    listed = f"expected one of {', '.join(names)}"
    return f"did you mean {' or '.join(near)}? {listed}" if near else listed
