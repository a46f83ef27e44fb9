"""Fix texts rewrite the user's own line, replacing the value as a whole expression."""

import pytest

from torchmem.doctor.fixes import _swap


@pytest.mark.parametrize("code, old, new, expected", [
    ("losses.append(loss)", "loss", "loss.item()", "losses.append(loss.item())"),
    ("epoch_logits.append(logits)", "logits", "logits.detach()", "epoch_logits.append(logits.detach())"),
    ("self.history.append(out)", "out", "out.detach()", "self.history.append(out.detach())"),
    ("total += loss", "loss", "loss.item()", "total += loss.item()"),
    ("firsts.append(batch[0, :4])", "batch[0, :4]", "batch[0, :4].clone()",
     "firsts.append(batch[0, :4].clone())"),
    ("x.append(y.loss)", "loss", "Z", "x.append(y.loss)"),  # an attribute is not the value
])
def test_swap_replaces_the_value_not_a_name_that_contains_it(code, old, new, expected):
    assert _swap(code, old, new) == expected
