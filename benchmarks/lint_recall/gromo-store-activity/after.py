# Source: https://github.com/growingnet/gromo/blob/e841406781549ee7cb30016e26c2e5044481dd1b/src/gromo/modules/growing_module.py
# Adapted excerpt, after the fix https://github.com/growingnet/gromo/commit/e841406781549ee7cb30016e26c2e5044481dd1b
# (trimmed to the code the fix touches; omitted lines are marked).
import torch
# ... (lines 6-12 omitted)
class MergeGrowingModule(torch.nn.Module):
    ...  # (lines 14-165 omitted)
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for t in (self.tensor_s, self.previous_tensor_s, self.previous_tensor_m):
            if t:
                t.updated = False

        if self.store_input > 0:
            self.input = x
            self.input.retain_grad()

        if self.post_merge_function and (x is not None):
            y = self.post_merge_function(x)
        else:
            y = x

        if self.store_activity > 0:
            self.activity = y.detach()
            self.tensor_s.updated = False  # reset the update flag

        return y
