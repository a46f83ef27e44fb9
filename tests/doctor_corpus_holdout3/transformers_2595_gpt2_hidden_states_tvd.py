# Source: https://github.com/huggingface/transformers/issues/2595
# Adapted: the reporter's trained GPT2DoubleHeadsModel replaced by a 2-layer GPT-2-style model
#   of width 64 returning the same tuple (lm_logits, mc_logits, presents, all_hidden_states),
#   so that `best_model(input_ids)[3][j]` is layer j's hidden states as in the report; the
#   stored report stops after the second hidden-state lookup, so the rest of the innermost loop
#   (the total variation distance between the softmaxed last-token hidden states, written into
#   TVD_tensor) and the call with random token ids (8 tokens, 4 test columns, 8 dummy columns
#   per test column) were completed from the function's names; cpu, seeded.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = nn.MultiheadAttention(n_embd, n_head, batch_first=True)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd))

    def forward(self, x):
        t = x.size(1)
        mask = torch.triu(torch.full((t, t), float('-inf')), diagonal=1)
        h = self.ln_1(x)
        a, _ = self.attn(h, h, h, attn_mask=mask, need_weights=False)
        x = x + a
        return x + self.mlp(self.ln_2(x)), (h, h)


class GPT2DoubleHeadsModel(nn.Module):
    def __init__(self, vocab_size=200, n_positions=64, n_embd=64, n_head=4, n_layer=2):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(n_positions, n_embd)
        self.h = nn.ModuleList([Block(n_embd, n_head) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.multiple_choice_head = nn.Linear(n_embd, 1)

    def forward(self, input_ids):
        x = self.wte(input_ids) + self.wpe(torch.arange(input_ids.size(1)))
        all_hidden_states, presents = (), ()
        for block in self.h:
            all_hidden_states = all_hidden_states + (x,)
            x, present = block(x)
            presents = presents + (present,)
        x = self.ln_f(x)
        all_hidden_states = all_hidden_states + (x,)
        lm_logits = self.lm_head(x)
        mc_logits = self.multiple_choice_head(x[:, -1]).squeeze(-1)
        return lm_logits, mc_logits, presents, all_hidden_states


# for loop to calculate TVD
def TVD_loop(test_i, test_dummy_i, nlayer, best_model):

    TVD_tensor = torch.zeros(test_i.size()[1], (nlayer+1), test_i.size()[0]).float()

    # replace every 0's in TVD_tensor to -2
    TVD_tensor = torch.where(TVD_tensor == 0.0, torch.tensor(-2.0), TVD_tensor)

    for m in range(test_i.size()[1]):

        input_ids = test_i[:,m]
        input_ids = torch.tensor(input_ids.tolist()).unsqueeze(0)

        # NOTE: Hidden states are in torch.FloatTensor,
        #       (one for the output of each layer + the output of the embeddings)
        # jth layer
        for j in range(nlayer+1):

            tst_hidden_states = best_model(input_ids)[3][j][0, (test_i.size()[0] - 1), :]

            for l in range(m * test_i.size()[0], (m+1) * test_i.size()[0]):

                input_ids_dummy = test_dummy_i[:,l]
                input_ids_dummy = torch.tensor(input_ids_dummy.tolist()).unsqueeze(0)

                tst_hidden_states_dummy = best_model(input_ids_dummy)[3][j][0, (test_i.size()[0] - 1), :]

                TVD = 0.5 * torch.sum(torch.abs(F.softmax(tst_hidden_states, dim=-1) -
                                                F.softmax(tst_hidden_states_dummy, dim=-1)))
                TVD_tensor[m, j, l - m * test_i.size()[0]] = TVD

        print(m, TVD_tensor[m].mean().item())

    return TVD_tensor


if __name__ == '__main__':
    torch.manual_seed(0)
    nlayer = 2
    best_model = GPT2DoubleHeadsModel(n_layer=nlayer)
    best_model.eval()
    test_i = torch.randint(0, 200, (8, 4))
    test_dummy_i = torch.randint(0, 200, (8, 4 * 8))
    TVD_tensor = TVD_loop(test_i, test_dummy_i, nlayer, best_model)
    print(TVD_tensor.shape)
