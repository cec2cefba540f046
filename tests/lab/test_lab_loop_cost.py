"""The loop logs, bit for bit, each window's micro-batch losses over the window's examples
added in order from zero (no timing here: see `make bench` for what the loop costs). Starting
from the first loss instead gives the same bits (0 + x is x), so this checks the sum and its
order, not how the accumulator is made."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from resume_lab.build import build_trainer
from resume_lab.config import LabConfig


@pytest.fixture(autouse=True)
def one_thread():
    torch.set_num_threads(1)


@pytest.mark.parametrize("accum", [1, 2, 3])
def test_logged_loss_is_bitwise_the_zeros_then_add_sum(accum):
    config = LabConfig(steps=10, accum=accum, dropout=0.0, eval_every=0)
    trainer = build_trainer(config, init_seed=0)
    for _ in range(3):
        window = list(trainer.sampler.batches(trainer.epoch, trainer.micro))[:accum]
        examples = sum(len(indices) for indices in window)
        expected = torch.zeros(())
        with torch.no_grad():  # dropout is off: the same forward the update will run
            for indices in window:
                logits = trainer.model(trainer.data.x_train[indices])
                loss = F.cross_entropy(logits, trainer.data.y_train[indices], reduction="sum")
                expected += loss / examples
        trainer.fit(trainer.step + 1)
        assert trainer.history[-1]["loss"] == expected.item()  # bitwise, not approximately
