"""Train, checkpoint, survive preemption, resume bit for bit: plain PyTorch.

    python recipe.py --output-dir DIR [--steps 200] [--accum 4]
                     [--save-every 20] [--seed 0] [--device cpu|cuda]

Kill it (kill -9 too), even mid-save, and run the same command again: it
ends with the weights of a run never interrupted, bit for bit. Exit codes:
0 done, DIR/final.pt the model's state_dict (or --help); 75 SIGTERM/SIGINT
in training, saved: rerun to resume; 1 a damaged or foreign checkpoint, or
an error; 2 bad options, or not the options the folder was made with.
"""

import argparse
import hashlib
import io
import json
import math
import os
import pickle
import random
import shutil
import signal
import sys
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

MICRO_BATCH = 32  # examples per forward pass
EVAL_EVERY = 10  # updates between evaluations
PATIENCE = 5  # evaluations without a new best before stopping early
KEEP_LAST = 2  # checkpoints kept besides the best one
EXIT_PREEMPTED = 75  # os.EX_TEMPFAIL: a temporary failure, to retry
SAME_RUN = ("steps", "accum", "seed", "device")  # a resume must not change
STATE_KEYS = {"model", "optimizer", "scheduler", "progress", "rng"}


class Refused(Exception):
    """A checkpoint that fails a check (1) or has other options (2)."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


# ---- Your experiment: replace these three with your data, model, optimizer
def make_data(seed: int) -> tuple[torch.Tensor, ...]:
    """Four Gaussian blobs in 16-D: 1,600 train, 400 validation."""
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(4, 16, generator=g)
    y = torch.randint(0, 4, (2000,), generator=g)
    x = centers[y] + 1.5 * torch.randn(2000, 16, generator=g)
    return x[:1600], y[:1600], x[1600:], y[1600:]


def make_model() -> nn.Module:
    return nn.Sequential(
        nn.Linear(16, 64), nn.ReLU(), nn.Dropout(0.1),
        nn.Linear(64, 64), nn.ReLU(), nn.Dropout(0.1),
        nn.Linear(64, 4))  # fmt: skip


def make_optimizer(model: nn.Module, steps: int) -> tuple[Any, Any]:
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    warmup = max(1, steps // 10)

    def factor(update: int) -> float:  # 10 % linear warm-up, then cosine
        if update < warmup:
            return (update + 1) / warmup
        done = (update - warmup) / max(1, steps - warmup)
        return 0.5 * (1 + math.cos(math.pi * min(done, 1.0)))

    return opt, torch.optim.lr_scheduler.LambdaLR(opt, factor)


# ---- The data position: an order that is a pure function of (seed, epoch)
def next_window(
    seed: int, epoch: int, micro: int, n: int, accum: int
) -> tuple[torch.Tensor, ...]:
    """Index batches of the next update: up to `accum` micro-batches from
    micro-batch `micro` of `epoch`. The epoch's last window may be short.
    The shuffle has its own generator: the global RNG is not drawn."""
    key = hashlib.sha256(f"{seed}/{epoch}".encode()).digest()
    g = torch.Generator().manual_seed(int.from_bytes(key[:8], "little"))
    order = torch.randperm(n, generator=g).split(MICRO_BATCH)
    return order[micro : micro + accum]


# ---- Random number generators: every stream the run draws from
def capture_rng() -> dict[str, Any]:
    state: dict[str, Any] = {"torch": torch.get_rng_state()}
    state["python"] = random.getstate()
    if torch.cuda.is_available():  # every device (not tested: no GPU here)
        state["cuda"] = torch.cuda.get_rng_state_all()
    numpy = sys.modules.get("numpy")
    if numpy is not None:  # weights_only refuses arrays: keep a plain list
        kind, key, pos, has_gauss, gauss = numpy.random.get_state()
        state["numpy"] = (kind, key.tolist(), pos, has_gauss, gauss)
    return state


def restore_rng(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    numpy = sys.modules.get("numpy")
    if "numpy" in state and numpy is not None:
        kind, key, pos, has_gauss, gauss = state["numpy"]
        key = numpy.array(key, dtype=numpy.uint32)
        numpy.random.set_state((kind, key, pos, has_gauss, gauss))


# ---- A checkpoint commits in one step: temp dir, manifest last, one rename
def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)  # fsync makes the folder's names durable
    os.fsync(fd)
    os.close(fd)


def write_synced(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def set_pointer(run: Path, name: str, target: str) -> None:
    """Point `name` at a checkpoint folder; one rename swaps it."""
    write_synced(run / f"tmp-{name}", target.encode())
    os.replace(run / f"tmp-{name}", run / name)
    fsync_dir(run)


def read_pointer(run: Path, name: str) -> str | None:
    path = run / name
    return path.read_text().strip() if path.exists() else None


def save_checkpoint(run: Path, state: dict[str, Any], info: dict[str, Any],
                    best: bool) -> None:  # fmt: skip
    name = f"step-{info['update']:06d}"
    tmp = run / f"tmp-{name}"  # one run per folder: a fixed name will do
    tmp.mkdir()
    buffer = io.BytesIO()
    torch.save(state, buffer)
    data = buffer.getvalue()
    write_synced(tmp / "state.pt", data)
    digest = hashlib.sha256(data).hexdigest()
    manifest = {**info, "sha256": {"state.pt": digest}}
    write_synced(tmp / "manifest.json", json.dumps(manifest).encode())
    fsync_dir(tmp)
    if (run / name).exists():  # committed by a run cut off before `latest`
        shutil.rmtree(tmp)
    else:
        os.rename(tmp, run / name)  # the commit
        fsync_dir(run)
    if best:  # before `latest`: a kill in between repeats this save
        set_pointer(run, "best", name)
    set_pointer(run, "latest", name)
    prune(run)


def prune(run: Path) -> None:
    keep = {read_pointer(run, "latest"), read_pointer(run, "best")}
    steps = sorted(p.name for p in run.glob("step-" + "[0-9]" * 6))
    for name in steps[:-KEEP_LAST]:
        if name not in keep:
            shutil.rmtree(run / name)


# ---- On resume: check everything before torch.load runs anything
def load_checkpoint(folder: Path, options: dict[str, Any]) -> Any:
    path = folder / "manifest.json"
    try:
        manifest = json.loads(path.read_bytes())
        made, digest = manifest["options"], manifest["sha256"]["state.pt"]
        changed = [key for key in SAME_RUN if made.get(key) != options[key]]
        data = (folder / "state.pt").read_bytes()  # hash and load these bytes
    except OSError as e:
        raise Refused(f"refused {e.filename}: {e.strerror}") from None
    except (ValueError, KeyError, TypeError, AttributeError):
        raise Refused(f"refused {path}: not a manifest of ours") from None
    if changed:
        key = changed[0]  # name the first option that changed
        raise Refused(f"{folder.parent} was made with --{key} "
                      f"{made.get(key)}, not {options[key]}: use the same "
                      "or another --output-dir", code=2)  # fmt: skip
    path = folder / "state.pt"
    if hashlib.sha256(data).hexdigest() != digest:
        raise Refused(f"refused {path}: its SHA-256 is not the manifest's")
    try:  # weights_only: calls nothing outside torch's allowlist
        state = torch.load(io.BytesIO(data), "cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError):
        state = None
    if not isinstance(state, dict) or STATE_KEYS - set(state):
        why = "not a training state that torch.load(weights_only=True) loads"
        raise Refused(f"refused {path}: {why}")
    return state


# ---- SIGTERM and SIGINT: stop at the next update boundary
def stop_on_signals() -> list[int]:
    """Only note the signal: a save inside a handler could cut into a save."""
    received: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: received.append(signum))
    return received


# ---- Training: after the initial weights, only dropout draws random numbers
@torch.no_grad()
def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """Mean validation loss. eval() turns dropout off, so no RNG is drawn."""
    model.eval()
    total = torch.zeros((), device=x.device)
    for xb, yb in zip(x.split(100), y.split(100), strict=True):
        total += F.cross_entropy(model(xb), yb, reduction="sum")
    model.train()
    return total.item() / len(x)


def one_update(model: nn.Module, opt: Any, sched: Any, batches: Any) -> float:
    """Accumulate a window's gradient, clip, step; return the pre-clip norm."""
    examples = sum(len(y) for _, y in batches)  # right for a short window
    for x, y in batches:
        loss = F.cross_entropy(model(x), y, reduction="sum")
        (loss / examples).backward()  # the window's mean, once summed
    norm = nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    opt.step()
    sched.step()  # the schedule counts updates, not micro-batches
    opt.zero_grad(set_to_none=True)
    return norm.item()


def train(args: argparse.Namespace) -> int:
    run, device = Path(args.output_dir), torch.device(args.device)
    run.mkdir(parents=True, exist_ok=True)
    stop = stop_on_signals()
    options = {k: getattr(args, k) for k in SAME_RUN}
    torch.manual_seed(args.seed)  # the initial weights
    x, y, val_x, val_y = (t.to(device) for t in make_data(args.seed))
    model = make_model().to(device)
    opt, sched = make_optimizer(model, args.steps)
    # Everything that changes as the run goes on, saved in each checkpoint:
    s: dict[str, Any] = {"update": 0, "epoch": 0, "micro": 0,
                         "best_loss": math.inf, "bad_evals": 0,
                         "stopped": False}  # fmt: skip
    latest = read_pointer(run, "latest")
    if latest is not None:
        state = load_checkpoint(run / latest, options)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        s = state["progress"]
        # Last, after every object is built and before the first forward:
        restore_rng(state["rng"])
        print(f"resumed from {run / latest} at update {s['update']}")
    for leftover in run.glob("tmp-step-*"):  # never committed: drop them
        shutil.rmtree(leftover)

    def checkpoint(best: bool) -> None:
        state = {"model": model.state_dict(), "optimizer": opt.state_dict(),
                 "scheduler": sched.state_dict(), "progress": s,
                 "rng": capture_rng()}  # fmt: skip
        info = {"update": s["update"], "options": options}
        save_checkpoint(run, state, info, best)

    saved = latest is not None
    while s["update"] < args.steps and not s["stopped"]:
        window = next_window(args.seed, s["epoch"], s["micro"], len(x),
                             args.accum)  # fmt: skip
        norm = one_update(model, opt, sched, [(x[i], y[i]) for i in window])
        s["update"] += 1
        s["micro"] += len(window)
        if s["micro"] * MICRO_BATCH >= len(x):  # the epoch is over
            s["epoch"], s["micro"] = s["epoch"] + 1, 0
        line, new_best = f"update {s['update']} grad-norm {norm:.4f}", False
        if s["update"] % EVAL_EVERY == 0:
            val_loss = evaluate(model, val_x, val_y)
            new_best = val_loss < s["best_loss"]
            if new_best:
                s["best_loss"], s["bad_evals"] = val_loss, 0
            else:
                s["bad_evals"] += 1
                s["stopped"] = s["bad_evals"] >= PATIENCE
            line += f" val-loss {val_loss:.4f}"
        print(line, flush=True)
        saved = s["update"] % args.save_every == 0 or new_best
        if saved:
            checkpoint(best=new_best)
        if stop:
            if not saved:
                checkpoint(best=False)
            print(f"stopped by signal {stop[0]}: run again to resume")
            return EXIT_PREEMPTED
    if not saved:
        checkpoint(best=False)
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)  # the weights, for inference
    write_synced(run / "tmp-final.pt", buffer.getvalue())
    os.replace(run / "tmp-final.pt", run / "final.pt")
    fsync_dir(run)
    print(f"finished at update {s['update']}: {run / 'final.pt'}")
    return 0


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line instead of the usage
        self.exit(2, f"{self.prog}: {message} (see --help)\n")


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = OneLineParser(prog="recipe.py", description="Train; rerun to resume.")
    p.add_argument("--output-dir", required=True, help="the run folder")
    p.add_argument("--steps", type=int, default=200, help="updates in all")
    p.add_argument("--accum", type=int, default=4, help="micro-batches")
    p.add_argument("--save-every", type=int, default=20, help="updates")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    args = p.parse_args(argv)
    least = {"steps": 1, "accum": 1, "save_every": 1, "seed": 0}
    for name, minimum in least.items():
        if getattr(args, name) < minimum:
            p.error(f"--{name.replace('_', '-')} must be at least {minimum}")
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: no CUDA device here; use --device cpu")
    if Path(args.output_dir).exists() and not Path(args.output_dir).is_dir():
        p.error(f"--output-dir {args.output_dir} is a file, not a folder")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.device == "cuda":  # untested here: this machine has no GPU
        # torch 2.4's reproducibility notes asked for it with deterministic ops
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.backends.cudnn.benchmark = False
    torch.use_deterministic_algorithms(True)
    try:
        return train(args)
    except Refused as e:
        print(f"recipe.py: {e}", file=sys.stderr)
        return e.code


if __name__ == "__main__":
    sys.exit(main())
