# Source: https://github.com/speechbrain/speechbrain/blob/5e36b5b5a12bbd00182de47f38fb78e5a27109a1/speechbrain/decoders/scorer.py
# Adapted excerpt, after the fix https://github.com/speechbrain/speechbrain/commit/5e36b5b5a12bbd00182de47f38fb78e5a27109a1
# (trimmed to the code the fix touches; omitted lines are marked).
import torch
# ... (lines 2-4 omitted)
import speechbrain as sb
# ... (lines 6-153 omitted)
class TransformerLMScorer(BaseScorerInterface):
    ...  # (lines 155-165 omitted)
    def __init__(self, language_model, temperature=1.0):
        self.lm = language_model
        self.lm.eval()
        self.temperature = temperature
        self.softmax = sb.nnet.activations.Softmax(apply_log=True)

    def score(self, inp_tokens, memory, candidates, attn):
        with torch.no_grad():
            if memory is None:
                memory = torch.empty(
                    inp_tokens.size(0), 0, device=inp_tokens.device
                )
            # Append the predicted token of the previous step to existing memory.
            memory = torch.cat([memory, inp_tokens.unsqueeze(1)], dim=-1)
            if not next(self.lm.parameters()).is_cuda:
                self.lm.to(inp_tokens.device)
            logits = self.lm(memory)
            log_probs = self.softmax(logits / self.temperature)
        return log_probs[:, -1, :], memory

    def permute_mem(self, memory, index):
        memory = torch.index_select(memory, dim=0, index=index)
        return memory

    def reset_mem(self, x, enc_lens):
        return None
