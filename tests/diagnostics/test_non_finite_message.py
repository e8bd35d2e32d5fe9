"""The NaN/Inf alert names the step its episode began at: its evidence is the latest
non-finite step (15), but the alert opened at the first (10), and the message said 15."""

from __future__ import annotations

import numpy as np

from grposcope.diagnostics import RunData
from grposcope.diagnostics.engine import evaluate
from grposcope.diagnostics.params import defaults


def _evaluate(n: int, **series: np.ndarray):
    steps = np.arange(1, n + 1)
    data = RunData({k: (steps, v) for k, v in series.items()}, "reward")
    return evaluate("dynamical_instability", data, defaults("dynamical_instability"))


def _reward(n: int) -> np.ndarray:
    return 0.5 + 0.01 * np.random.default_rng(0).standard_normal(n)


def test_message_names_the_first_non_finite_step_of_the_episode():
    reward = _reward(25)
    reward[[9, 14]] = np.nan  # steps 10 and 15: one episode (15 is inside the resolve window)
    outcome = _evaluate(25, reward=reward, loss=np.full(25, 0.1))
    assert outcome.status == "firing" and outcome.current.opened_step == 10
    nf = outcome.evidence["non_finite"]
    assert (nf["step"], nf["keys"]) == (15, ["reward"])  # the latest, as before
    assert (nf["first_step"], nf["first_keys"]) == (10, ["reward"])
    assert outcome.message == "non-finite reward at step 10 (latest: reward at step 15)"


def test_a_single_non_finite_step_reads_as_before():
    loss = np.full(25, 0.1)
    loss[19] = np.inf
    outcome = _evaluate(25, reward=_reward(25), loss=loss)
    assert outcome.current.opened_step == 20
    assert outcome.message == "non-finite loss at step 20"
    assert outcome.evidence["non_finite"]["first_step"] == 20


def test_a_later_episode_names_its_own_first_step():
    reward = _reward(80)
    reward[[4, 59, 64]] = np.nan  # step 5 (resolved by 25), then 60 and 65: a second episode
    outcome = _evaluate(80, reward=reward, loss=np.full(80, 0.1))
    first, second = outcome.episodes
    assert first.resolved_step is not None and first.message == "non-finite reward at step 5"
    assert second.opened_step == 60
    assert second.message == "non-finite reward at step 60 (latest: reward at step 65)"


def test_grad_norm_overflow_streak_says_where_it_reached_ten_in_a_row():
    grad = np.ones(30)
    grad[4:16] = np.nan  # steps 5..16: the 10th in a row is step 14
    outcome = _evaluate(30, reward=_reward(30), loss=np.full(30, 0.1), grad_norm=grad)
    assert outcome.current.opened_step == 14
    assert outcome.message.startswith(
        "grad_norm non-finite on 10+ logged steps in a row (the 10th in a row at step 14, "
        "through step 16): the gradients keep overflowing"
    )


def test_grad_norm_streak_after_a_nan_loss_names_the_loss_first():
    loss = np.full(30, 0.1)
    loss[2] = np.nan  # step 3
    grad = np.ones(30)
    grad[3:15] = np.nan  # steps 4..15: ten in a row at step 13
    outcome = _evaluate(30, reward=_reward(30), loss=loss, grad_norm=grad)
    assert outcome.current.opened_step == 3
    assert outcome.message.endswith("; first non-finite loss at step 3")
    assert "(through step 15)" in outcome.message


def test_a_lone_non_finite_reward_warns_and_a_second_in_a_row_pages():
    """A reward mean is NaN when every reward function returned nothing for a batch (TRL's
    nanmean) or a logger wrote a bad value: one such point warns; the next one non-finite too,
    or a non-finite loss, is a broken run and pages."""
    reward = _reward(30)
    reward[19] = np.nan  # step 20 alone
    lone = _evaluate(30, reward=reward, loss=np.full(30, 0.1))
    assert lone.current.opened_step == 20 and lone.severity == "warning"
    reward[20] = np.inf  # step 21 too: two in a row
    two = _evaluate(30, reward=reward, loss=np.full(30, 0.1))
    assert two.severity == "critical" and two.current.opened_step == 20
    loss = np.full(30, 0.1)
    loss[19] = np.nan
    reward[20] = 0.5
    both = _evaluate(30, reward=reward, loss=loss)  # the loss at step 20 is NaN as well
    assert both.severity == "critical" and both.current.opened_step == 20
