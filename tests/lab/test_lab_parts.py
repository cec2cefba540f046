"""The parts one by one: data, sampler, model, schedule, evaluation, RNG capture."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from resume_lab.build import build_trainer
from resume_lab.config import ConfigError, LabConfig
from resume_lab.data import NUM_TRAIN, NUM_VAL, make_blobs
from resume_lab.evaluate import evaluate
from resume_lab.loop import DETERMINISTIC_FIELDS
from resume_lab.model import NUM_PARAMETERS, build_model, count_parameters
from resume_lab.rng import capture_rng, restore_rng
from resume_lab.sampler import StepIndexedSampler, epoch_seed
from resume_lab.schedule import build_scheduler, make_lr_lambda


@pytest.fixture(autouse=True)
def one_thread():
    """One torch thread, as the CLI sets by default: faster for this tiny model and far steadier
    on a busy machine (two OpenMP threads spinning on two shared cores slow down many times
    over). The root conftest puts the previous count back after each test."""
    torch.set_num_threads(1)


def global_rng_states():
    return torch.get_rng_state(), random.getstate(), np.random.get_state(legacy=True)


def assert_same_rng(before, after):
    assert torch.equal(before[0], after[0])
    assert before[1] == after[1]
    assert all(np.array_equal(x, y) for x, y in zip(before[2], after[2], strict=True))


def test_parameter_count():
    assert NUM_PARAMETERS == 5_508
    assert count_parameters(build_model()) == 5_508


def test_data_is_fixed_and_leaves_global_rng_alone():
    before = global_rng_states()
    first, second = make_blobs(0), make_blobs(0)
    assert_same_rng(before, global_rng_states())
    assert torch.equal(first.x_train, second.x_train) and torch.equal(first.y_val, second.y_val)
    assert first.x_train.shape == (NUM_TRAIN, 16) and first.x_val.shape == (NUM_VAL, 16)
    assert (
        torch.bincount(first.y_train).tolist() == [400] * 4 or len(set(first.y_train.tolist())) == 4
    )
    assert not torch.equal(make_blobs(1).x_train, first.x_train)


@pytest.mark.parametrize(("num_examples", "micro_batch"), [(1600, 32), (100, 32)])
def test_sampler_start_at_k_equals_slicing_the_full_order(num_examples, micro_batch):
    sampler = StepIndexedSampler(num_examples, micro_batch, seed=3)
    for epoch in (0, 1, 7):
        full = list(sampler.batches(epoch))
        assert torch.equal(torch.cat(full).sort().values, torch.arange(num_examples))  # each once
        for k in range(len(full)):
            started = list(StepIndexedSampler(num_examples, micro_batch, seed=3).batches(epoch, k))
            assert len(started) == len(full) - k
            assert all(torch.equal(a, b) for a, b in zip(started, full[k:], strict=True))
    if num_examples % micro_batch:
        assert len(full[-1]) == num_examples % micro_batch  # the short last micro-batch is kept


def test_sampler_is_pure_and_never_touches_global_rng():
    before = global_rng_states()
    a = StepIndexedSampler(1600, 32, seed=5)
    orders = [a.order(epoch).clone() for epoch in range(3)]
    list(a.batches(2, 10))
    assert_same_rng(before, global_rng_states())
    torch.manual_seed(12345)  # a different global state changes nothing
    b = StepIndexedSampler(1600, 32, seed=5)
    assert all(torch.equal(b.order(e), orders[e]) for e in range(3))
    assert not torch.equal(orders[0], orders[1])  # a new permutation each epoch
    assert not torch.equal(StepIndexedSampler(1600, 32, seed=6).order(0), orders[0])


def test_torch_generator_keeps_only_32_bits_of_a_seed():
    """Why epoch_seed() hashes (seed, epoch) instead of packing it into one 64-bit integer."""
    high_5 = torch.randperm(10, generator=torch.Generator().manual_seed(5 << 32))
    high_6 = torch.randperm(10, generator=torch.Generator().manual_seed(6 << 32))
    assert torch.equal(high_5, high_6)
    seeds = {epoch_seed(seed, epoch) for seed in range(20) for epoch in range(50)}
    assert len(seeds) == 1000 and max(seeds) < 2**32


def test_sampler_state_round_trip():
    sampler = StepIndexedSampler(1600, 32, seed=9)
    fresh = StepIndexedSampler(1600, 32, seed=10)  # built from another seed, as in the bug
    fresh.load_state_dict(sampler.state_dict())
    assert torch.equal(fresh.order(4), sampler.order(4))
    with pytest.raises(ValueError, match="another dataset"):
        StepIndexedSampler(1600, 16, seed=0).load_state_dict(sampler.state_dict())


def test_schedule_warmup_then_cosine_per_update():
    lam = make_lr_lambda(total_steps=100, warmup_frac=0.1)
    assert [lam(s) for s in range(10)] == pytest.approx([(s + 1) / 10 for s in range(10)])
    assert lam(10) == pytest.approx(1.0)
    assert lam(55) == pytest.approx(0.5)
    assert lam(100) == pytest.approx(0.0, abs=1e-12)
    trainer = build_trainer(LabConfig(steps=30, accum=3, eval_every=0), init_seed=0)
    trainer.fit(30)
    expected = make_lr_lambda(30, 0.1)
    # One scheduler step per update, whatever the accumulation factor.
    assert [r["lr"] for r in trainer.history] == pytest.approx(
        [3e-3 * expected(s) for s in range(30)]
    )


def test_scheduler_state_has_no_callable():
    model = build_model()
    scheduler = build_scheduler(torch.optim.AdamW(model.parameters()), 10, 0.1)
    assert scheduler.state_dict()["lr_lambdas"] == [None]  # the closure is rebuilt, not pickled


def test_evaluate_restores_mode_uses_sums_and_leaves_rng_alone():
    model, data = build_model(), make_blobs(0)
    x, y = data.x_val[:333], data.y_val[:333]  # 333 = 200 + 133: a short last batch
    for mode in (True, False):
        model.train(mode)
        before = global_rng_states()
        metrics = evaluate(model, x, y)
        assert_same_rng(before, global_rng_states())
        assert model.training is mode
    model.eval()
    with torch.no_grad():
        logits = model(x)
    assert metrics["val_loss"] == pytest.approx(torch.nn.functional.cross_entropy(logits, y).item())
    assert metrics["val_accuracy"] == (logits.argmax(-1) == y).sum().item() / 333


def test_a_dataloader_would_have_consumed_the_training_rng():
    """Why evaluate() slices tensors: on this torch, a DataLoader iterator without its own
    generator draws from the global torch RNG even with shuffle=False."""
    data = make_blobs(0)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(data.x_val, data.y_val), batch_size=200, shuffle=False
    )
    before = torch.get_rng_state()
    list(loader)
    assert not torch.equal(before, torch.get_rng_state())


@pytest.mark.parametrize("eval_every", [1, 0])
def test_evaluation_cadence_does_not_change_training(eval_every):
    def trajectory(every: int):
        config = LabConfig(steps=40, eval_every=every, patience=None)
        trainer = build_trainer(config, init_seed=0)
        trainer.fit(40)
        fields = [f for f in DETERMINISTIC_FIELDS if not f.startswith("val_")]
        return [[r[f] for f in fields] for r in trainer.history], trainer.model.state_dict()

    reference, reference_weights = trajectory(20)
    other, other_weights = trajectory(eval_every)
    assert other == reference
    assert all(torch.equal(reference_weights[k], other_weights[k]) for k in reference_weights)


def test_rng_capture_restore_round_trip_through_weights_only(tmp_path):
    torch.manual_seed(1)
    random.seed(2)
    np.random.seed(3)
    np.random.randn()  # leave a cached Gaussian in NumPy's legacy state
    state = capture_rng()
    torch.save(state, tmp_path / "rng.pt")
    expected = (torch.rand(5), random.random(), np.random.randn(3))
    torch.manual_seed(99)
    random.seed(99)
    np.random.seed(99)
    restore_rng(torch.load(tmp_path / "rng.pt", weights_only=True))
    assert torch.equal(torch.rand(5), expected[0])
    assert random.random() == expected[1]
    assert np.array_equal(np.random.randn(3), expected[2])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"steps": 0}, "steps"),
        ({"accum": -1}, "accum"),
        ({"lr": 0.0}, "lr"),
        ({"seed": -1}, "seed"),
    ],
)
def test_config_rejects_bad_values(change, message):
    with pytest.raises(ConfigError, match=message):
        LabConfig(**change)
