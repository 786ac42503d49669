"""problem=chars: next-character prediction on a text corpus (the group's character-level language models).

The corpus is `problem.path`: a text file (the last `val_fraction` of its characters are the validation text, as
nanoGPT's shakespeare_char splits), or a WikiText-103 raw directory (`wiki.train.raw` for training,
`wiki.valid.raw` for validation). `path: null` is the corpus shipped with the project, Tiny Shakespeare
(corpus/README.md: its source and licence). Nothing is downloaded.

The vocabulary is the set of characters of the training text, in code-point order; a validation character the
training text never shows becomes one extra id (`<unk>`) that no model can predict right.

Every method is scored on the same characters: the validation text cut into blocks of `block_size` inputs, each
block's targets the next characters (blocks overlap by one character, so each validation character after the first
is a target once), at most `val_chars` targets. A model predicts target i of a block from the block's inputs 0..i:
its first target has one character of context, its last `block_size`.
"""

from __future__ import annotations

import codecs
import functools
import gzip
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Optional

import numpy as np

from sweep.config.fields import Rule, nonneg_int, positive_int
from sweep.config.footprint import Term
from sweep.errors import ConfigError
from sweep.paths import shown
from sweep.problems.base import SEED_RULE, ProblemBase

SHIPPED = Path(__file__).parent / "corpus" / "tinyshakespeare.txt.gz"
SHIPPED_CHARS = 1_115_394  # Tiny Shakespeare's characters (its bytes: ASCII), for size estimates
WIKITEXT = ("wiki.train.raw", "wiki.valid.raw")  # a WikiText-103 raw directory (problem=chars reads these two)
WIKITEXT_TEST = "wiki.test.raw"  # method=char_model's test split (read after training: challenge_text)
SPLITS = ("train", "valid", "test")  # method=char_model's three splits of a corpus


@dataclass
class Corpus:
    """A corpus as integer ids: the training and validation text, and the vocabulary they index."""

    train: np.ndarray  # (n_train,) ids, the smallest unsigned dtype that holds them
    val: np.ndarray  # (n_val,) ids
    vocab: str  # id -> character (a validation character the training text lacks is the id len(vocab))
    source: str  # what was read: "tinyshakespeare (shipped)", a file, a directory
    block_size: int
    val_chars: int  # 0: every validation character
    secret: tuple[int, ...] = ()  # what the sparse problems' records name; a corpus has none
    unknown: int = 0  # validation characters not in the vocabulary (each one an <unk>)
    _blocks: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def vocab_size(self) -> int:
        """Ids a model predicts over: the vocabulary, plus <unk> when the validation text has one."""
        return len(self.vocab) + (1 if self.unknown else 0)

    def val_blocks(self) -> tuple[np.ndarray, np.ndarray]:
        """(x, y), each (blocks, block_size) int64: the validation blocks every method is scored on."""
        return self._cut("val", self.val)

    def train_blocks(self) -> tuple[np.ndarray, np.ndarray]:
        """As many blocks from the start of the training text (the training accuracy, after the clock)."""
        return self._cut("train", self.train, len(self.val_blocks()[0]))

    def _cut(self, key: str, ids: np.ndarray, n: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        if key not in self._blocks:
            t = self.block_size
            if n is None:
                n = (len(ids) - 1) // t
                if self.val_chars:
                    n = min(n, max(1, self.val_chars // t))
            n = min(n, (len(ids) - 1) // t)
            cut = ids[: n * t + 1].astype(np.int64)
            self._blocks[key] = (cut[:-1].reshape(n, t), cut[1:].reshape(n, t))
        return self._blocks[key]

    def sizes(self) -> dict[str, float]:
        """The corpus's figures every run records: vocabulary, training characters, validation targets scored."""
        return {
            "vocab_size": float(self.vocab_size),
            "train_chars": float(len(self.train)),
            "val_targets": float(self.val_blocks()[1].size),
        }

    def batch(self, rng: np.random.RandomState, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
        """A training batch as nanoGPT draws one: `batch_size` windows at random offsets, (x, y) int64."""
        t = self.block_size
        ix = rng.randint(len(self.train) - t, size=batch_size)
        w = np.lib.stride_tricks.sliding_window_view(self.train, t + 1)[ix].astype(np.int64)
        return w[:, :-1], w[:, 1:]


@dataclass
class Chars(ProblemBase):
    """Next-character prediction: the corpus at `path`, contexts of `block_size` characters."""

    field_rules: ClassVar[tuple[Rule, ...]] = (
        Rule("problem.block_size", "an integer >= 1", positive_int),
        Rule(
            "problem.val_fraction",
            "a number with 0 < val_fraction < 1",
            lambda v, c: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < 1,
        ),
        Rule("problem.val_chars", "an integer >= 0 (0: every validation character)", nonneg_int),
        SEED_RULE,  # the batches' order from RandomState(seed), the weights from seed + 1
    )

    name: str = "chars"
    path: Optional[str] = None  # null: the shipped Tiny Shakespeare; a text file; a WikiText-103 raw directory
    block_size: int = 64  # characters of context (the gpt's positions; every method's validation blocks)
    val_fraction: float = 0.1  # a single file: its last tenth is the validation text (nanoGPT's split)
    val_chars: int = 16384  # validation targets every method is scored on (0: all of the validation text)
    seed: int = 42  # the training batches' order (RandomState(seed)) and the weights (seed + 1)

    @classmethod
    def check_config(cls, cfg: Any) -> None:
        """The corpus must be there: a missing path is one line naming it, before any job starts."""
        path = cfg.select("problem.path")
        if path is not None:
            for file in filter(None, corpus_files(str(path))):
                _check_utf8(file, *(lambda s: (s.st_size, s.st_mtime_ns))(file.stat()))
        if cfg.select("problem.val_chars", 0) and cfg.select("problem.block_size", 1) > cfg.problem.val_chars:
            raise ConfigError(
                f"problem.val_chars={cfg.problem.val_chars} is not allowed: expected 0 or at least "
                f"problem.block_size={cfg.problem.block_size} (one validation block)"
            )

    @classmethod
    def footprint(cls, cfg: Any) -> list[Term]:
        """The corpus read whole as text, a 64 MB chunk of its code points, and its ids (4 bytes a character at
        most each)."""
        return [Term("corpus", 3 * corpus_bytes(cfg.select("problem.path")) + (64 << 20), ("problem.path",))]

    def generate(self) -> Corpus:
        train, val, source = read_texts(self.path, self.val_fraction)
        return encode(train, val, source, self.block_size, self.val_chars)


def corpus_bytes(path: Optional[str]) -> int:
    """The corpus's size in bytes (the shipped one: as unpacked)."""
    if path is None:
        return SHIPPED_CHARS
    train, val = corpus_files(str(path))
    return train.stat().st_size + (val.stat().st_size if val is not None else 0)


def validation_chars(cfg: Any) -> int:
    """The validation characters a run scores (problem.val_chars, or with 0 the validation text's size)."""
    if cfg.select("problem.val_chars", 0):
        return int(cfg.problem.val_chars)
    path = cfg.select("problem.path")
    if path is not None and (val := corpus_files(str(path))[1]) is not None:
        return val.stat().st_size
    return int(corpus_bytes(path) * float(cfg.select("problem.val_fraction", 0.1)))


def corpus_files(path: str) -> tuple[Path, Optional[Path]]:
    """(training file, validation file or None for a split of one file); ConfigError naming what is missing."""
    if not str(path):  # Path('') is the working directory: it was called "a directory without wiki..."
        raise ConfigError(
            f"problem.path={path!r} is empty: expected a text file, a WikiText-103 raw directory "
            f"({', '.join(WIKITEXT)}), or null for the shipped Tiny Shakespeare"
        )
    p = Path(os.path.expanduser(path))
    try:
        return _corpus_files(path, p)
    except OSError as e:  # a name the filesystem refuses (ENAMETOOLONG): the job ran, then failed with it
        raise ConfigError(
            f"problem.path={shown(path)!r}: {e.strerror}: expected a text file, a WikiText-103 raw directory "
            f"({', '.join(WIKITEXT)}), or null for the shipped Tiny Shakespeare"
        ) from None


def _corpus_files(path: str, p: Path) -> tuple[Path, Optional[Path]]:
    if p.is_dir():
        missing = [n for n in WIKITEXT if not (p / n).is_file()]
        if missing:
            there = [n for n in missing if (p / n).exists()]  # (a folder of that name was called missing)
            what = f"whose {', '.join(there)} is not a file" if there else f"without {', '.join(missing)}"
            raise ConfigError(
                f"problem.path={path!r} is a directory {what}: expected a text file or a "
                f"WikiText-103 raw directory ({', '.join(WIKITEXT)})"
            )
        return p / WIKITEXT[0], p / WIKITEXT[1]
    if not p.is_file():
        # a FIFO or a device (/dev/stdin) is there, and is not a file to read whole, twice
        what = "is not a regular file" if p.exists() else "does not exist"
        raise ConfigError(
            f"problem.path={path!r} {what}: expected a text file, a WikiText-103 raw directory "
            f"({', '.join(WIKITEXT)}), or null for the shipped Tiny Shakespeare"
        )
    return p, None


@functools.lru_cache(maxsize=2)
def read_texts(path: Optional[str], val_fraction: float) -> tuple[str, str, str]:
    """(training text, validation text, source), read once per process (a sweep's worker runs many jobs)."""
    if path is None:
        text = gzip.decompress(SHIPPED.read_bytes()).decode("utf-8")
        return *split(text, val_fraction), "tinyshakespeare (shipped)"
    train_file, val_file = corpus_files(path)
    if val_file is not None:
        return _read(train_file), _read(val_file), str(path)
    return *split(_read(train_file), val_fraction), str(path)


@functools.lru_cache(maxsize=8)
def _check_utf8(p: Path, size: int, mtime_ns: int) -> None:
    """ConfigError where `p` is not UTF-8 text, found before any job (a sweep's jobs each failed on it), read in
    16 MB chunks; once per file and version (size and mtime) in a process."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    done = 0
    with open(p, "rb") as f:
        while True:
            chunk = f.read(1 << 24)
            try:
                decoder.decode(chunk, final=not chunk)
            except UnicodeDecodeError as e:
                raise ConfigError(
                    f"problem.path: {p.name} is not UTF-8 text ({e.reason} at byte {done + e.start})"
                ) from None
            if not chunk:
                return
            done += len(chunk)


def _read(p: Path) -> str:
    try:
        return p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"problem.path: {p.name} is not UTF-8 text ({e.reason} at byte {e.start})") from None


def split(text: str, val_fraction: float) -> tuple[str, str]:
    n = int(len(text) * (1 - val_fraction))
    return text[:n], text[n:]


def encode(train: str, val: str, source: str, block_size: int, val_chars: int) -> Corpus:
    """Both texts as ids of the training text's vocabulary (code-point order): two passes over chunks of the text
    (count the code points, then look them up), so WikiText-103's 540 M characters never stand as int64 at once."""
    if len(train) < block_size + 1 or len(val) < block_size + 1:
        raise ConfigError(
            f"problem.block_size={block_size} is not allowed: {source} has {len(train)} training and {len(val)} "
            f"validation characters, and each needs at least block_size + 1"
        )
    seen = np.zeros(0x110000, dtype=bool)  # every Unicode code point
    for codes in _code_points(train):
        seen[codes] = True
    present = np.flatnonzero(seen)
    lookup = np.full(0x110000, len(present), dtype=np.uint32)  # anything not in the training text: <unk>
    lookup[present] = np.arange(len(present))
    dtype = np.uint8 if len(present) < 256 else np.uint16 if len(present) < 65536 else np.uint32
    ids, vids = (np.concatenate([lookup[c].astype(dtype) for c in _code_points(t)]) for t in (train, val))
    vocab = "".join(map(chr, present.tolist()))
    return Corpus(ids, vids, vocab, source, block_size, val_chars, unknown=int((vids == len(present)).sum()))


def _code_points(text: str, chunk: int = 1 << 24):
    """The text's code points, a chunk (16 M characters, 64 MB) at a time."""
    for i in range(0, len(text), chunk):
        yield np.frombuffer(text[i : i + chunk].encode("utf-32-le"), dtype=np.uint32)


def challenge_text(path: Optional[str], val_fraction: float, split: str) -> str:
    """The character challenge's (method=char_model) text of `split`: a WikiText-103 raw directory's own files;
    a single file or the shipped corpus in three disjoint pieces, training the first 1 - 2 x val_fraction, then
    the validation text (val_fraction), then the test text (the last val_fraction, problem=chars's validation
    text). Read when asked, so the test text is read only once training has ended."""
    if path is not None and Path(os.path.expanduser(path)).is_dir():
        if split == "test":
            test = Path(os.path.expanduser(path)) / WIKITEXT_TEST
            if not test.is_file():
                raise ConfigError(f"problem.path={path!r} is a directory without {WIKITEXT_TEST} (the test split)")
            return _read(test)
        train, valid, _ = read_texts(path, val_fraction)
        return train if split == "train" else valid
    text = gzip.decompress(SHIPPED.read_bytes()).decode("utf-8") if path is None else _read(corpus_files(path)[0])
    cut = (int(len(text) * (1 - 2 * val_fraction)), int(len(text) * (1 - val_fraction)))
    return {"train": text[: cut[0]], "valid": text[cut[0] : cut[1]], "test": text[cut[1] :]}[split]
