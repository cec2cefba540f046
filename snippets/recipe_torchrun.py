"""snippets/recipe.py on W processes (FSDP2, DCP): torch + stdlib only.

    OMP_NUM_THREADS=1 torchrun --standalone --nproc-per-node W \\
        recipe_torchrun.py --output-dir DIR [--steps 200] [--accum 4]
        [--save-every 20] [--seed 0] [--device cpu|cuda]

In its tests, after SIGTERM to torchrun (at W = 2 and 4) or kill -9 to a rank
or to the whole job (at W = 2, at random moments), a rerun at the same W ended
with the weights of a run never interrupted, bit for bit. Each rank exits as
recipe.py does (0, 75, 1, 2).
"""

import argparse
import gc
import hashlib
import io
import json
import math
import os
import random
import shutil
import signal
import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn.functional as F
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    get_state_dict,
    set_state_dict,
)
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import FSDPModule, fully_shard

MICRO_BATCH = 32  # examples per forward pass, all ranks together
EVAL_EVERY = 10  # updates between evaluations
PATIENCE = 5  # evaluations without a new best before stopping early
KEEP_LAST = 2  # checkpoints kept besides the best one
EXIT_PREEMPTED = 75  # EX_TEMPFAIL: "user is invited to retry"
SAME_RUN = ("steps", "accum", "seed", "device")  # a resume must not change
RANK = int(os.environ.get("RANK", "0"))  # torchrun sets both
WORLD = int(os.environ.get("WORLD_SIZE", "1"))


class Refused(Exception):
    """A checkpoint that fails a check (1) or has other options (2)."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


# ---- Your experiment: replace these three with your data, model, optimizer
def make_data(seed: int) -> tuple[torch.Tensor, ...]:
    """Four overlapping Gaussian blobs in 16-D: 1,600 train, 400 validation."""
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(4, 16, generator=g)
    y = torch.randint(0, 4, (2000,), generator=g)
    x = centers[y] + 1.5 * torch.randn(2000, 16, generator=g)
    return x[:1600], y[:1600], x[1600:], y[1600:]


def make_model() -> nn.Module:
    return nn.Sequential(
        nn.Linear(16, 64), nn.ReLU(), nn.Dropout(0.1),
        nn.Linear(64, 64), nn.ReLU(), nn.Dropout(0.1),
        nn.Linear(64, 4),
    )  # fmt: skip


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
    """Index batches of the next update, the same on every rank: up to
    `accum` micro-batches from micro-batch `micro` of `epoch`. The shuffle
    has its own generator: the global RNG is not drawn."""
    key = hashlib.sha256(f"{seed}/{epoch}".encode()).digest()
    g = torch.Generator().manual_seed(int.from_bytes(key[:8], "little"))
    order = torch.randperm(n, generator=g).split(MICRO_BATCH)
    return order[micro : micro + accum]


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


def sha256(path: Path) -> str:
    with open(path, "rb") as f:  # read in blocks: a shard may be large
        return hashlib.file_digest(f, "sha256").hexdigest()


def set_pointer(run: Path, name: str, target: str) -> None:
    """Point `name` at a checkpoint folder; one rename swaps it."""
    write_synced(run / f"tmp-{name}", target.encode())
    os.replace(run / f"tmp-{name}", run / name)
    fsync_dir(run)


def read_pointer(run: Path, name: str) -> str | None:
    path = run / name
    return path.read_text().strip() if path.exists() else None


def save_checkpoint(run: Path, model: nn.Module, opt: Any,
                    own: dict[str, Any], info: dict[str, Any],
                    best: bool) -> None:  # fmt: skip
    """Every rank writes its pieces into a new folder (DCP overwrites in
    place: a rank killed midway leaves a silent mix); rank 0 commits it."""
    name = f"step-{info['update']:06d}"
    tmp = run / f"tmp-{name}"  # one run per folder: a fixed name will do
    if RANK == 0:
        tmp.mkdir()
    dist.barrier()  # the folder exists before any rank writes into it
    weights, optim = get_state_dict(model, opt)  # this rank's shards
    own["param_groups"] = optim["param_groups"]  # numbers, no tensors
    buffer = io.BytesIO()
    torch.save(own, buffer)  # per-rank state under a name of its own
    write_synced(tmp / f"rank-{RANK}.pt", buffer.getvalue())
    # Tensors only: DCP saves any other value pickled, and loads it with
    # weights_only=False. It returns when every rank's files are written.
    dcp.save({"model": weights, "optim": optim["state"]}, checkpoint_id=tmp)
    if RANK != 0:
        return
    digests = {p.name: sha256(p) for p in sorted(tmp.iterdir())}
    manifest = {**info, "sha256": digests}
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
    keep = {name, read_pointer(run, "best")}  # and the last KEEP_LAST
    for old in sorted(run.glob("step-" + "[0-9]" * 6))[:-KEEP_LAST]:
        if old.name not in keep:
            shutil.rmtree(old)


# ---- On resume: rank 0 checks every file before DCP or torch.load reads it
def verify(folder: Path, options: dict[str, Any]) -> None:
    """DCP reads .metadata with plain pickle, which runs whatever a crafted
    file holds: the hashes are what refuse a damaged or swapped one. They do
    not stop a forger who rewrites the manifest too: load checkpoints you
    made."""
    path = folder / "manifest.json"
    try:
        manifest = json.loads(path.read_bytes())
        made, digests = manifest["options"], dict(manifest["sha256"])
        changed = [key for key in options if made.get(key) != options[key]]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        raise Refused(f"refused {path}: no manifest of ours") from None
    if changed:
        key = changed[0]  # name the first option that changed
        raise Refused(f"{folder.parent} was made with --{key} "
                      f"{made.get(key)}, not {options[key]}: use the same "
                      "or another --output-dir", code=2)  # fmt: skip
    names = {p.name for p in folder.iterdir()} - {"manifest.json"}
    if names != digests.keys():
        raise Refused(f"refused {folder}: not the files its manifest lists")
    for path in sorted(folder / name for name in names):
        if sha256(path) != digests[path.name]:
            raise Refused(f"refused {path}: its SHA-256 is not the manifest's")


# ---- Training: after the initial weights, only dropout draws random numbers
@torch.no_grad()
def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """Mean validation loss of the whole set: the same on every rank."""
    model.eval()  # no dropout, so no RNG is drawn
    total = torch.zeros((), device=x.device)
    for xb, yb in zip(x.split(100), y.split(100), strict=True):
        total += F.cross_entropy(model(xb), yb, reduction="sum")
    model.train()
    return total.item() / len(x)


def one_update(model: nn.Module, opt: Any, sched: Any, batches: Any) -> float:
    """Accumulate a window's gradient, clip, step; return the pre-clip norm."""
    assert isinstance(model, FSDPModule)
    examples = sum(len(y) for _, y in batches)  # all ranks', short or not
    for i, (x, y) in enumerate(batches):
        # This rank's piece: the RANK-th of W near-equal contiguous slices.
        x, y = x.tensor_split(WORLD)[RANK], y.tensor_split(WORLD)[RANK]
        # The ranks' gradients meet once, after the window's last backward.
        model.set_requires_gradient_sync(i == len(batches) - 1)
        loss = F.cross_entropy(model(x), y, reduction="sum")
        (loss / examples).backward()  # summed over ranks: the window's mean
    # The gradients are DTensors (FSDP2's shards), and so is their norm.
    norm = nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    opt.step()
    sched.step()  # the schedule counts updates, not micro-batches
    opt.zero_grad(set_to_none=True)
    return norm.full_tensor().item()  # type: ignore[attr-defined]


def train(args: argparse.Namespace, device: torch.device) -> int:
    run = Path(args.output_dir)
    # SIGTERM, SIGINT: only noted here (a save inside a handler could cut
    # into a save); every rank stops at the next update boundary.
    stop: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: stop.append(signum))
    if RANK == 0:
        run.mkdir(parents=True, exist_ok=True)
        for leftover in run.glob("tmp-step-*"):  # never committed: drop them
            shutil.rmtree(leftover)
    options = {k: getattr(args, k) for k in SAME_RUN}
    options["nproc-per-node"] = WORLD  # bitwise only at the same W
    # Rank 0 verifies `latest` and sends every rank its verdict: all refuse
    # or none does (one rank alone would leave the others waiting).
    verdict: list[Any] = [read_pointer(run, "latest"), None]
    if RANK == 0 and verdict[0] is not None:
        try:
            verify(run / verdict[0], options)
        except Refused as e:
            verdict[1] = (str(e), e.code)
    dist.broadcast_object_list(verdict, src=0)  # pickled by our own rank 0
    if verdict[1] is not None:
        raise Refused(*verdict[1])  # before any work
    latest = verdict[0]

    torch.manual_seed(args.seed)  # the initial weights, the same on all ranks
    x, y, val_x, val_y = (t.to(device) for t in make_data(args.seed))
    model = make_model().to(device)
    # FSDP2: each rank keeps a dim-0 shard of the parameters and AdamW's state.
    fully_shard(model, mesh=init_device_mesh(device.type, (WORLD,)))
    assert isinstance(model, FSDPModule)
    # FSDP2 averages the ranks' gradients; each is divided by the window's
    # example count already, so a plain sum is wanted instead.
    model.set_gradient_divide_factor(1.0)
    model.set_force_sum_reduction_for_comms(True)
    opt, sched = make_optimizer(model, args.steps)
    # Dropout: a stream of its own on each rank, from (seed, rank).
    key = hashlib.sha256(f"{args.seed}/rank/{RANK}".encode()).digest()
    torch.manual_seed(int.from_bytes(key[:8], "little"))
    # Everything that changes as the run goes on, saved in each checkpoint:
    s: dict[str, Any] = {"update": 0, "epoch": 0, "micro": 0,
                         "best_loss": math.inf, "bad_evals": 0,
                         "stopped": False}  # fmt: skip
    if latest is not None:
        # weights_only: tensors and plain containers, never code
        own = torch.load(run / latest / f"rank-{RANK}.pt", weights_only=True)
        weights, optim = get_state_dict(model, opt)  # DCP loads into these
        dcp.load({"model": weights, "optim": optim["state"]},
                 checkpoint_id=run / latest)  # fmt: skip
        optim["param_groups"] = own["param_groups"]
        set_state_dict(model, opt, model_state_dict=weights,
                       optim_state_dict=optim)  # fmt: skip
        sched.load_state_dict(own["scheduler"])
        s = own["progress"]
        # Last, after every object is built and before the first forward:
        torch.set_rng_state(own["rng"]["torch"])
        random.setstate(own["rng"]["python"])
        if device.type == "cuda":
            torch.cuda.set_rng_state(own["rng"]["cuda"])
        print(f"resumed from {run / latest} at update {s['update']}")

    def checkpoint(best: bool) -> None:
        # Every RNG this rank draws from (numpy's too, if yours does: see
        # recipe.py); on a GPU its own device's (untested: no GPU here).
        rng = {"torch": torch.get_rng_state(), "python": random.getstate()}
        if device.type == "cuda":
            rng["cuda"] = torch.cuda.get_rng_state()
        own = {"scheduler": sched.state_dict(), "progress": s, "rng": rng}
        info = {"update": s["update"], "options": options}
        save_checkpoint(run, model, opt, own, info, best)

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
        # Ranks see a signal at different updates: they agree, with one
        # small all_reduce per update, to stop at the first that any saw.
        anyone = torch.tensor([len(stop)], device=device)
        dist.all_reduce(anyone, op=dist.ReduceOp.MAX)
        if anyone.item():
            if not saved:
                checkpoint(best=False)
            print(f"stopped after update {s['update']}: run again to resume")
            return EXIT_PREEMPTED
    if not saved:
        checkpoint(best=False)
    # The whole model for inference, gathered from every rank's shards.
    weights = {k: v.full_tensor().cpu() for k, v in model.state_dict().items()}
    if RANK == 0:
        buffer = io.BytesIO()
        torch.save(weights, buffer)
        write_synced(run / "tmp-final.pt", buffer.getvalue())
        os.replace(run / "tmp-final.pt", run / "final.pt")
        fsync_dir(run)
    print(f"finished at update {s['update']}: {run / 'final.pt'}")
    return 0


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, and from rank 0 only
        self.exit(2, f"{self.prog}: {message} (see --help)\n" * (RANK == 0))


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = OneLineParser(description="Train on W processes; rerun to resume.")
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
    if RANK != 0:  # rank 0 prints for every rank
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115
    device = torch.device("cpu")
    if args.device == "cuda":  # untested here: this machine has no GPU
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)  # one GPU per rank
        # The workspace setting cuBLAS's docs give for reproducible results.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.backends.cudnn.benchmark = False
    torch.use_deterministic_algorithms(True)
    dist.init_process_group("nccl" if args.device == "cuda" else "gloo")
    try:
        code = train(args, device)
    except Refused as e:  # on every rank: rank 0 shared its verdict
        if RANK == 0:
            print(f"recipe_torchrun.py: {e}", file=sys.stderr)
        code = e.code
    # Every rank gets here, without train's model: meet, collect, leave.
    dist.barrier()
    gc.collect()
    dist.destroy_process_group()
    # When a rank fails, torchrun sends SIGTERM to the others: ignored from
    # here on, it cannot replace this rank's exit code.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    return code


if __name__ == "__main__":
    sys.exit(main())
