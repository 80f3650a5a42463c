"""The text corpus every machine has: the Python standard library's own source files.

Two workloads come out of it, as bytes (the trained pair is byte-level, vocabulary 256):

- code: the `.py` files themselves;
- prose: the docstrings of those files, extracted with `ast` (English sentences with a
  little reStructuredText), one document per file.

Train and held-out are split by file, with a hash of the file's path relative to the
standard library, so the split is the same on every machine and no held-out prompt was
ever seen in training, not even as the docstring of a training file. Directories that are
not library source (the test suite, IDLE, bundled wheels, codec tables) are left out.
"""

from __future__ import annotations

import ast
import sysconfig
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

# Tests are a third of the stdlib and mostly boilerplate; encodings/ is generated codec
# tables; the others are apps or vendored data rather than library source.
EXCLUDED_DIRS = frozenset(
    {
        "test",
        "tests",
        "idlelib",
        "lib2to3",
        "turtledemo",
        "ensurepip",
        "pydoc_data",
        "encodings",
        "site-packages",
        "dist-packages",
        "__pycache__",
    }
)
# One file in ten is held out: ~1 MB of code and ~150 kB of docstrings, enough prompts
# for every batch size the validation runs, and nine tenths left to train on.
HELD_OUT_MODULUS = 10
PROSE_MIN_CHARS = 40  # one-line docstrings ("Return x.") teach nothing about prose


def stdlib_dir() -> Path:
    """The directory of the running interpreter's pure-Python standard library."""
    return Path(sysconfig.get_paths()["stdlib"])


def is_held_out(relpath: str) -> bool:
    """Whether a file (path relative to the stdlib, '/'-separated) belongs to held-out."""
    return zlib.crc32(relpath.encode("utf-8")) % HELD_OUT_MODULUS == 0


def list_source_files(root: Path | None = None) -> list[tuple[str, Path]]:
    """(relative path, absolute path) of every library `.py` file, sorted by relative path."""
    root = Path(root) if root is not None else stdlib_dir()
    out = []
    for path in root.rglob("*.py"):
        rel = path.relative_to(root)
        if set(rel.parts[:-1]) & EXCLUDED_DIRS or rel.name.startswith("_sysconfigdata"):
            continue
        out.append((rel.as_posix(), path))
    return sorted(out)


def docstrings(source: str) -> list[str]:
    """Cleaned docstrings of the module, classes and functions in `source`, in file order."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    nodes = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, nodes):
            doc = ast.get_docstring(node, clean=True)
            if doc and len(doc) >= PROSE_MIN_CHARS:
                found.append((getattr(node, "lineno", 0), doc))
    return [doc for _, doc in sorted(found, key=lambda item: item[0])]


@dataclass
class Split:
    """Documents of one workload in one split, as UTF-8 bytes, with their source paths."""

    docs: list[bytes] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)

    @property
    def num_bytes(self) -> int:
        return sum(len(d) for d in self.docs)

    def concatenated(self) -> np.ndarray:
        """All documents joined by a blank line, as a uint8 array."""
        return np.frombuffer(b"\n\n".join(self.docs), dtype=np.uint8).copy()


@dataclass
class Corpus:
    """code/prose x train/held-out, keyed `"code"`, `"prose"` -> {"train", "held_out"}."""

    root: Path
    splits: dict[str, dict[str, Split]]
    num_files: int

    def summary(self) -> dict:
        return {
            "root": str(self.root),
            "files": self.num_files,
            "held_out_rule": f"crc32(relative path) % {HELD_OUT_MODULUS} == 0",
            **{
                f"{kind}_{part}_bytes": self.splits[kind][part].num_bytes
                for kind in ("code", "prose")
                for part in ("train", "held_out")
            },
            **{
                f"{kind}_{part}_docs": len(self.splits[kind][part].docs)
                for kind in ("code", "prose")
                for part in ("train", "held_out")
            },
        }


def load_corpus(root: Path | None = None, *, held_out_only: bool = False) -> Corpus:
    """Read and split the standard library. Files that are not UTF-8 are skipped.

    `held_out_only` reads only the held-out files (a tenth of the time), for prompts.
    """
    root = Path(root) if root is not None else stdlib_dir()
    splits = {kind: {"train": Split(), "held_out": Split()} for kind in ("code", "prose")}
    files = list_source_files(root)
    for rel, path in files:
        if held_out_only and not is_held_out(rel):
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        part = "held_out" if is_held_out(rel) else "train"
        splits["code"][part].docs.append(text.encode("utf-8"))
        splits["code"][part].paths.append(rel)
        prose = "\n\n".join(docstrings(text))
        if prose:
            splits["prose"][part].docs.append(prose.encode("utf-8"))
            splits["prose"][part].paths.append(rel)
    return Corpus(root=root, splits=splits, num_files=len(files))


def sample_prompts(split: Split, count: int, length: int, *, seed: int) -> np.ndarray:
    """`count` prompts of exactly `length` bytes, each from a different document if possible.

    Documents shorter than `length` are skipped; the start offset inside a document is
    drawn uniformly and snapped to the start of a line so that prompts read naturally.
    Returns a uint8 array of shape (count, length).
    """
    rng = np.random.default_rng(seed)
    eligible = [i for i, d in enumerate(split.docs) if len(d) >= 2 * length]
    if not eligible:
        raise ValueError(f"no held-out document is {2 * length} bytes long")
    order = rng.permutation(eligible)
    prompts = []
    for j in range(count):
        doc = split.docs[int(order[j % len(order)])]
        start = int(rng.integers(0, len(doc) - length))
        line_start = doc.rfind(b"\n", 0, start) + 1
        if len(doc) - line_start >= length:
            start = line_start
        prompts.append(np.frombuffer(doc[start : start + length], dtype=np.uint8))
    return np.stack(prompts)
