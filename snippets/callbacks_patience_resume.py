"""Early stopping across a restart: with and without the callback's state in
the checkpoint."""

import torch

from resume_lab.build import build_trainer
from resume_lab.callbacks import EarlyStopping
from resume_lab.compare import tensors_equal
from resume_lab.config import LabConfig
from resume_lab.events import EARLY_STOPPING
from resume_lab.resume import resume, save_training

# Bitwise comparisons need the same thread count on both sides.
torch.set_num_threads(1)
# Evaluate every 2 updates, stop after 3 evaluations without improvement.
config = LabConfig(steps=60, eval_every=2, patience=3)


def stopper(trainer):
    return next(cb for cb in trainer.callbacks if isinstance(cb, EarlyStopping))


# A: one process, never interrupted.
a = build_trainer(config, init_seed=config.seed)
assert a.fit(config.steps) == EARLY_STOPPING
best_step = stopper(a).best_step

# B: killed one evaluation before A stopped, while the patience counter is
# running.
kill_at = a.step - config.eval_every
b = build_trainer(config, init_seed=config.seed)
b.fit(kill_at)
saved = stopper(b).state_dict()
bad_at_kill = saved["bad"]  # evaluations without improvement so far
assert bad_at_kill == config.patience - 1 and saved["best_step"] == best_step
save_training(b, "run")  # run/step-NNNNNN, named by run/last
del b

# Resumed with the callback's state (resume() restores it): the same run as A.
restored = build_trainer(config, init_seed=config.seed + 1)
resume(restored, "run")
assert restored.fit(config.steps) == EARLY_STOPPING
assert restored.step == a.step
assert stopper(restored).state_dict() == stopper(a).state_dict()
assert tensors_equal(restored.model.state_dict(), a.model.state_dict())

# Resumed with everything EXCEPT the callback's state: its patience starts
# again from zero.
forgetful = build_trainer(config, init_seed=config.seed + 1)
resume(forgetful, "run")
forgetful.callbacks = [EarlyStopping(config.patience)]
assert stopper(forgetful).state_dict() == {
    "best": -1.0,
    "best_step": 0,
    "bad": 0,
}
# The first evaluation after the restart counts as an improvement ...
first_evaluation = kill_at + config.eval_every
forgetful.fit(first_evaluation)
assert stopper(forgetful).best_step == first_evaluation
assert stopper(forgetful).bad == 0
# ... and the patience starts over.
assert forgetful.fit(config.steps) == EARLY_STOPPING
assert forgetful.step > a.step  # it trains past the point where A stopped
# And "best" now names another update.
assert stopper(forgetful).best_step != best_step
assert not tensors_equal(forgetful.model.state_dict(), a.model.state_dict())

print(
    f"A (uninterrupted):        best at update {best_step}, "
    f"stopped at update {a.step}\n"
    f"killed at update {kill_at}:      best {saved['best']:.4f}, "
    f"{saved['bad']} evaluations without improvement\n"
    f"resumed with its state:   stopped at update {restored.step}, "
    "bitwise equal to A\n"
    f"resumed without it:       stopped at update {forgetful.step}, "
    f"best at update {stopper(forgetful).best_step}"
)
