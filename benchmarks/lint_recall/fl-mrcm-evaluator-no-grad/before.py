# Source: https://github.com/guopengf/FL-MRCM/blob/946c981a044452333791b7da26609c0874da292c/models/test.py
# Adapted excerpt, before the fix https://github.com/guopengf/FL-MRCM/commit/c89eea1eb9a00c33ed6cad4d53f8bf6b4ce104f2
# (trimmed to the code the fix touches; omitted lines are marked).
import torch
# ... (lines 6-161 omitted)
class evaluator_normal(object):
    ...  # (lines 163-168 omitted)
    def evaluate_recon(self,net_g, epoch=None):
        net_g.eval()
        # testing
        test_logs = []
        for idx, batch in enumerate(self.data_loader):
            input, target, mean, std,_, fname, slice = batch
            output = net_g(input.to(self.device))
            # sum up batch loss
            test_loss = F.l1_loss(output, target.to(self.device))
            mean = mean.unsqueeze(1).unsqueeze(2).to(self.device)
            std = std.unsqueeze(1).unsqueeze(2).to(self.device)
            test_logs.append({
                'fname': fname,
                'slice': slice,
                'output': (output * std + mean).cpu().detach().numpy(),
                'target': (target.to(self.device) * std + mean).cpu().numpy(),
                'loss': test_loss.cpu().detach().numpy(),
            })
