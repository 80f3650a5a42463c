"""Train the real draft/target pair the validation runs: byte-level decoders that predict
Python and its docstrings, trained on the standard library's own sources
(`profiler.groundtruth.corpus`).

`python -m profiler train-pair` writes, under `data/models/`:

- `specplan-byte-target.safetensors`, `specplan-byte-draft.safetensors`: the weights in
  bfloat16 (half the bytes of float32; the models run in float32 after loading), with the
  architecture as JSON in the safetensors metadata;
- `card.json` and `CARD.md`: the command, corpus, split, steps, losses and timings.

Both architectures also have rows in `data/models.csv` (ids `specplan-byte-target` and
`specplan-byte-draft`), so `python -m profiler run` profiles exactly these shapes.

Losses are cross-entropy in nats per byte; bits per byte = nats / ln 2.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

from profiler.groundtruth.corpus import Corpus, load_corpus
from profiler.model import ArchConfig, DecoderLM
from profiler.options import MAX_TRAIN_STEPS

MODELS_DIR = Path(__file__).resolve().parents[2] / "data" / "models"
TARGET_ID = "specplan-byte-target"
DRAFT_ID = "specplan-byte-draft"
BYTE_VOCAB = 256

# Sizes: on a 2-core CPU the draft's decode step costs about a sixth of the target's
# (c = t_D / t_T ~ 0.15), so speculation can pay, and the target trains on ~2 M bytes in
# about five minutes. 4 x 192 is the deepest/widest target that fits that budget.
TARGET_CONFIG = ArchConfig(
    vocab_size=BYTE_VOCAB,
    hidden_size=192,
    num_layers=4,
    num_heads=4,
    num_kv_heads=4,
    head_dim=48,
    intermediate_size=512,
)
DRAFT_CONFIG = ArchConfig(
    vocab_size=BYTE_VOCAB,
    hidden_size=96,
    num_layers=1,
    num_heads=2,
    num_kv_heads=2,
    head_dim=48,
    intermediate_size=256,
)
CONFIGS = {TARGET_ID: TARGET_CONFIG, DRAFT_ID: DRAFT_CONFIG}


@dataclass(frozen=True)
class TrainSettings:
    """One model's optimisation. Tokens seen = steps * batch_size * seq_len."""

    steps: int
    batch_size: int = 16
    # 512 bytes covers the validation's longest context (prompt + generation).
    seq_len: int = 512
    lr: float = 3e-3  # small models tolerate a high Adam rate after a short warm-up
    warmup_steps: int = 20
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    prose_fraction: float = 0.5  # half of every batch is docstrings, half is code


DEFAULT_TARGET_STEPS = 240
DEFAULT_DRAFT_STEPS = 480  # the draft is ~10x cheaper per step; give it twice the data
EVAL_WINDOWS = 48  # held-out windows per workload for the card's held-out loss


def num_params(cfg: ArchConfig) -> int:
    """Exact parameter count of a `DecoderLM` with this config (tied embedding counted once)."""
    return sum(p.numel() for p in DecoderLM(cfg, device="meta").parameters())


class WindowSampler:
    """Random training windows of seq_len + 1 bytes from the code and prose train splits."""

    def __init__(self, corpus: Corpus, seq_len: int, seed: int) -> None:
        self.code = corpus.splits["code"]["train"].concatenated()
        self.prose = corpus.splits["prose"]["train"].concatenated()
        self.seq_len = seq_len
        self.rng = np.random.default_rng(seed)

    def _windows(self, data: np.ndarray, count: int) -> np.ndarray:
        starts = self.rng.integers(0, len(data) - self.seq_len - 1, size=count)
        return np.stack([data[s : s + self.seq_len + 1] for s in starts])

    def batch(self, batch_size: int, prose_fraction: float) -> torch.Tensor:
        n_prose = round(batch_size * prose_fraction)
        parts = [self._windows(self.code, batch_size - n_prose)]
        if n_prose:
            parts.append(self._windows(self.prose, n_prose))
        return torch.from_numpy(np.concatenate(parts).astype(np.int64))


def lm_loss(model: DecoderLM, windows: torch.Tensor) -> torch.Tensor:
    """Mean next-byte cross-entropy in nats over windows [B, T+1]."""
    logits = model(windows[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), windows[:, 1:].reshape(-1))


def learning_rate(step: int, s: TrainSettings) -> float:
    """Linear warm-up, then cosine decay to min_lr_ratio * lr at the last step."""
    if step < s.warmup_steps:
        return s.lr * (step + 1) / s.warmup_steps
    progress = (step - s.warmup_steps) / max(1, s.steps - s.warmup_steps)
    return s.lr * (s.min_lr_ratio + (1 - s.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


def train_model(
    cfg: ArchConfig,
    corpus: Corpus,
    settings: TrainSettings,
    *,
    seed: int,
    log=print,
    name: str = "",
) -> tuple[DecoderLM, dict]:
    """Train one model from scratch; returns it (float32, eval mode) and its training log."""
    torch.manual_seed(seed)
    model = DecoderLM(cfg, dtype=torch.float32, seed=seed)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": settings.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=settings.lr,
        betas=(0.9, 0.95),
    )
    sampler = WindowSampler(corpus, settings.seq_len, seed)
    losses = []
    start = time.perf_counter()
    model.train()
    for step in range(settings.steps):
        for group in opt.param_groups:
            group["lr"] = learning_rate(step, settings)
        loss = lm_loss(model, sampler.batch(settings.batch_size, settings.prose_fraction))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), settings.grad_clip)
        opt.step()
        losses.append(loss.item())
        if step % 20 == 0 or step == settings.steps - 1:
            log(
                f"[{name}] step {step + 1}/{settings.steps} loss {losses[-1]:.3f} "
                f"({time.perf_counter() - start:.0f} s)"
            )
    model.eval()
    tail = losses[-20:]
    return model, {
        "steps": settings.steps,
        "tokens_seen": settings.steps * settings.batch_size * settings.seq_len,
        "train_seconds": round(time.perf_counter() - start, 1),
        "final_train_loss": round(float(np.mean(tail)), 4),
        "final_train_loss_note": f"mean of the last {len(tail)} steps, nats per byte",
        "loss_curve_every_20": [round(x, 4) for x in losses[::20]],
    }


@torch.no_grad()
def held_out_loss(model: DecoderLM, corpus: Corpus, seq_len: int, seed: int) -> dict[str, float]:
    """Mean loss in nats/byte on fixed held-out windows, code and prose separately."""
    rng = np.random.default_rng(seed)
    out = {}
    for kind in ("code", "prose"):
        data = corpus.splits[kind]["held_out"].concatenated()
        starts = rng.integers(0, len(data) - seq_len - 1, size=EVAL_WINDOWS)
        windows = torch.from_numpy(
            np.stack([data[s : s + seq_len + 1] for s in starts]).astype(np.int64)
        )
        losses = [float(lm_loss(model, windows[i : i + 8])) for i in range(0, len(windows), 8)]
        out[kind] = round(float(np.mean(losses)), 4)
    return out


def _rounded_to_storage(model: DecoderLM) -> DecoderLM:
    """The model as it will be loaded: weights rounded to bfloat16, run in float32."""
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).float())
    return model


def save_model(model: DecoderLM, path: Path, model_id: str) -> None:
    tensors = {n: p.detach().to(torch.bfloat16).contiguous() for n, p in model.state_dict().items()}
    meta = {"id": model_id, "arch": json.dumps(model.cfg.to_dict()), "format": "specplan/v1"}
    save_file(tensors, str(path), metadata=meta)


def load_model(model_id: str, models_dir: Path = MODELS_DIR, *, dtype=torch.float32) -> DecoderLM:
    """A trained model from `models_dir/<id>.safetensors`, in eval mode."""
    path = Path(models_dir) / f"{model_id}.safetensors"
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} not found: run `python -m profiler train-pair` to create the pair"
        )
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as fh:
        meta = fh.metadata() or {}
    if "arch" not in meta:
        raise ValueError(f"{path}: metadata field 'arch' missing, not a specplan model file")
    cfg = ArchConfig(**json.loads(meta["arch"]))
    model = DecoderLM(cfg, dtype=dtype)
    state = {k: v.to(dtype) for k, v in load_file(str(path)).items()}
    model.load_state_dict(state)
    return model.eval()


def check_pair(models_dir: Path, flag: str = "--models-dir") -> None:
    """Refuse, before any work, a folder that does not hold the trained pair."""
    from profiler.flags import UsageError

    for model_id in (TARGET_ID, DRAFT_ID):
        path = Path(models_dir) / f"{model_id}.safetensors"
        if not path.is_file():
            raise UsageError(
                f"{flag}: {path} not found: run `python -m profiler train-pair` to create the pair"
            )


def load_pair(models_dir: Path = MODELS_DIR, *, dtype=torch.float32):
    """(target, draft) as trained by `train-pair`."""
    return load_model(TARGET_ID, models_dir, dtype=dtype), load_model(
        DRAFT_ID, models_dir, dtype=dtype
    )


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _card_markdown(card: dict) -> str:
    lines = [
        "# SpecPlan byte-level draft/target pair",
        "",
        "Trained by SpecPlan itself so that speculative-decoding acceptance rates on this",
        "machine mean something; used by `python -m profiler validate`.",
        "",
        f"- Command: `{card['command']}`",
        f"- Corpus: {card['corpus']['description']}",
        f"  ({card['corpus']['root']}, Python {card['python']}, {card['corpus']['files']} files)",
        f"- Split: {card['corpus']['held_out_rule']} is held out (never trained on)",
        f"- Seed {card['seed']}, {card['threads']} CPU threads, torch {card['torch']}, "
        f"{card['device']}",
        f"- Wall time {card['total_seconds'] / 60:.1f} min; 1-minute load average "
        f"{card['load_average_start'][0]:.1f} at the start, {card['load_average_end'][0]:.1f} "
        "at the end (above the thread count: other jobs shared the cores)",
        "",
        "| model | params | layers x hidden | steps | tokens seen | train min | final train loss "
        "| held-out code | held-out prose |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for model_id, m in card["models"].items():
        a = m["arch"]
        lines.append(
            f"| {model_id} | {m['params']:,} | {a['num_layers']} x {a['hidden_size']} "
            f"| {m['steps']} | {m['tokens_seen']:,} | {m['train_seconds'] / 60:.1f} "
            f"| {m['final_train_loss']:.3f} | {m['held_out_loss']['code']:.3f} "
            f"| {m['held_out_loss']['prose']:.3f} |"
        )
    lines += [
        "",
        "Losses are next-byte cross-entropy in nats per byte (bits = nats / ln 2); the final",
        "train loss is the mean of the last 20 steps, the held-out losses are measured on",
        f"{EVAL_WINDOWS} fixed windows per workload after rounding the weights to bfloat16",
        "(the stored precision). Full details: `card.json`.",
        "",
    ]
    if card.get("timing_note"):
        lines += [card["timing_note"], ""]
    return "\n".join(lines)


def train_pair(
    out_dir: Path = MODELS_DIR,
    *,
    target_steps: int = DEFAULT_TARGET_STEPS,
    draft_steps: int = DEFAULT_DRAFT_STEPS,
    seq_len: int = 512,
    batch_size: int = 16,
    seed: int = 0,
    threads: int = 2,
    command: str = "",
    log=print,
) -> dict:
    """Train both models, save them and their card under `out_dir`; returns the card."""
    torch.set_num_threads(threads)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    load_start = os.getloadavg()
    corpus = load_corpus()
    summary = corpus.summary()
    log(f"corpus: {summary}")
    models = {}
    plan = [(TARGET_ID, target_steps, seed), (DRAFT_ID, draft_steps, seed + 1)]
    for model_id, steps, model_seed in plan:
        settings = TrainSettings(steps=steps, batch_size=batch_size, seq_len=seq_len)
        model, info = train_model(
            CONFIGS[model_id], corpus, settings, seed=model_seed, log=log, name=model_id
        )
        _rounded_to_storage(model)
        info["held_out_loss"] = held_out_loss(model, corpus, seq_len, seed=1234)
        log(f"[{model_id}] held-out loss {info['held_out_loss']}")
        path = out_dir / f"{model_id}.safetensors"
        save_model(model, path, model_id)
        info.update(
            {
                "arch": model.cfg.to_dict(),
                "params": num_params(model.cfg),
                "settings": settings.__dict__,
                "seed": model_seed,
                "file": path.name,
                "file_bytes": path.stat().st_size,
                "sha256": _sha256(path),
                "storage_dtype": "bfloat16",
            }
        )
        models[model_id] = info
    card = {
        "command": command or "python -m profiler train-pair",
        "python": platform.python_version(),
        "torch": torch.__version__,
        "device": f"cpu ({platform.processor() or platform.machine()})",
        "threads": threads,
        "seed": seed,
        "total_seconds": round(time.perf_counter() - t0, 1),
        # Wall times stretch when other jobs share the cores; the load says how much.
        "load_average_start": [round(x, 2) for x in load_start],
        "load_average_end": [round(x, 2) for x in os.getloadavg()],
        "corpus": {
            "description": "the Python standard library's own .py files (code) and their "
            "docstrings extracted with ast (prose), as UTF-8 bytes",
            **summary,
        },
        "models": models,
    }
    (out_dir / "card.json").write_text(json.dumps(card, indent=2) + "\n", encoding="utf-8")
    (out_dir / "CARD.md").write_text(_card_markdown(card), encoding="utf-8")
    log(f"wrote {out_dir} in {card['total_seconds']:.0f} s")
    return card


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=MODELS_DIR, help="output directory")
    parser.add_argument(
        "--target-steps",
        type=int,
        default=DEFAULT_TARGET_STEPS,
        help=f"1..{MAX_TRAIN_STEPS:,} (default %(default)s)",
    )
    parser.add_argument(
        "--draft-steps",
        type=int,
        default=DEFAULT_DRAFT_STEPS,
        help=f"1..{MAX_TRAIN_STEPS:,} (default %(default)s)",
    )
    parser.add_argument("--seq-len", type=int, default=512, help="training window in bytes")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--threads",
        type=int,
        help="torch CPU threads (default 2, or the CPUs this process may use if fewer)",
    )


def run_from_args(args: argparse.Namespace, argv: list[str] | None = None) -> int:
    from profiler import options as lim
    from profiler.flags import check_whole
    from simulator.inputs.catalog import default_models

    window = min(default_models()[m].max_position_embeddings for m in (TARGET_ID, DRAFT_ID))
    for flag, low, high in (
        ("target_steps", 1, MAX_TRAIN_STEPS),
        ("draft_steps", 1, MAX_TRAIN_STEPS),
        ("seq_len", 1, window),
        ("batch_size", 1, lim.MAX_BATCH),
        ("threads", 1, lim.max_threads()),
        ("seed", 0, lim.MAX_SEED),
    ):
        check_whole(f"--{flag.replace('_', '-')}", getattr(args, flag), low, high)
    threads = args.threads if args.threads is not None else min(2, lim.max_threads())
    command = "python -m profiler train-pair " + " ".join(argv if argv is not None else [])
    train_pair(
        args.out,
        target_steps=args.target_steps,
        draft_steps=args.draft_steps,
        seq_len=args.seq_len,
        batch_size=args.batch_size,
        seed=args.seed,
        threads=threads,
        command=command.strip(),
    )
    return 0
