"""Growth that falls back and rises again over the run's own steps (a sawtooth), and
gradients of one optimizer among several never cleared. Each mechanism on a script of its
own next to a healthy twin, through the real command line (the growth verdict reads the
whole process's heap)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPTS = Path(__file__).parent / "scripts_unit"


def _top(data: dict) -> dict:
    assert data["findings"], (data["growth"], data["notes"])
    return data["findings"][0]


def test_a_chain_rebuilt_by_every_call_of_a_sampler_is_a_sawtooth_and_is_cut_where_it_enters(doctor):
    # each call chains 24 steps' graphs through `x`; the next call starts afresh: the
    # steps' memory rises, falls back, rises again. The detach goes before the step's
    # first read of `x` (line 17), not before its rebinding (line 19), which would leave
    # the model's input hanging on the chain; the re-run proves it
    data, _ = doctor.run_file(SCRIPTS / "sampler_chain_per_call.py", "--verify")
    cpu = data["growth"][0]
    assert cpu["verdict"] == "growing" and cpu["stretches"] >= 2, cpu
    top = _top(data)
    assert (top["cause"], top["culprit"]["name"], top["culprit"]["line"]) == (
        "hidden_state_chain", "x", 19)
    assert top["edit"]["first_line"] == 17
    assert top["edit"]["statement"] == "x = x.detach()"
    assert top["verification"]["status"] == "verified", top["verification"]


def test_a_sampler_under_no_grad_is_flat(doctor):
    data, _ = doctor.run_file(SCRIPTS / "healthy_sampler_no_grad.py")
    assert data["findings"] == []
    assert all(g["verdict"] != "growing" for g in data["growth"]), data["growth"]


def test_a_container_that_keeps_every_batch_until_the_epoch_ends(doctor):
    data, proc = doctor.run_file(SCRIPTS / "epoch_outputs_kept.py")
    cpu = data["growth"][0]
    assert cpu["verdict"] == "growing" and cpu["stretches"] == 3, cpu
    assert "a sawtooth" in proc.stderr
    top = _top(data)
    assert (top["cause"], top["culprit"]["name"], top["culprit"]["line"]) == (
        "growing_container", "outputs", 18)
    assert any("emptied now and then" in e for e in top["evidence"])


def test_an_epoch_of_losses_as_numbers_is_flat(doctor):
    data, _ = doctor.run_file(SCRIPTS / "healthy_epoch_losses_kept.py")
    assert data["findings"] == []
    assert all(g["verdict"] != "growing" for g in data["growth"]), data["growth"]


def test_predictions_concatenated_over_every_evaluation_pass(doctor):
    # one tensor that grows (`preds = torch.cat((preds, out))`), let go after each pass
    data, _ = doctor.run_file(SCRIPTS / "eval_cat_predictions.py")
    top = _top(data)
    assert (top["cause"], top["culprit"]["name"], top["culprit"]["line"]) == (
        "growing_container", "preds", 11)
    assert top["data"]["phase"] == "eval-no-grad"


def test_labels_concatenated_over_evaluation_are_too_small_to_report(doctor):
    data, _ = doctor.run_file(SCRIPTS / "healthy_eval_cat_labels.py")
    assert data["findings"] == []


def test_one_optimizer_of_two_never_cleared(doctor):
    # the generator's optimizer is cleared every step; the critic's never is: its
    # gradients are summed over every step (the generator's backward adds to them too)
    data, _ = doctor.run_file(SCRIPTS / "two_optimizers_one_not_cleared.py")
    found = [f for f in data["findings"] if f["cause"] == "grad_not_cleared"]
    assert [f["culprit"]["name"] for f in found] == ["opt_critic"]
    assert any("on `opt_critic`" in e for e in found[0]["evidence"])


def test_two_optimizers_each_cleared(doctor):
    data, _ = doctor.run_file(SCRIPTS / "healthy_two_optimizers_cleared.py")
    assert data["findings"] == []
