# Source: https://github.com/hiyoung123/SoftMaskedBert/issues/15
#   code: model/soft_masked_bert.py (SoftMaskedBert), model/decotor.py (BiGRU), optim_schedule.py
#   (ScheduledOptim) and train.py (SoftMaskedBertTrainer.iteration) at commit 25b62c7
# Adapted: SoftMaskedBert.forward, BiGRU, ScheduledOptim and SoftMaskedBertTrainer (train, evaluate,
#   iteration) kept with their names and structure, _init_inputs cut to its encoder-only branches;
#   mask_e made with .detach(), the workaround given in the repository's issue #16 (without it
#   current torch refuses the second backward through the init-time embedding graph); the
#   transformers BertModel/BertTokenizer replaced by stand-ins with the same attributes
#   (embeddings, encoder, config.to_dict(), mask_token_id): word/position/type embeddings with
#   LayerNorm, two nn.TransformerEncoderLayer blocks returning a tuple; tqdm dropped (prints
#   instead); the csv dataset by 12 random batches of 8 sentences of 32 ids over a 300-token
#   vocabulary; 2 training epochs then one evaluation pass; cpu, seeded.
import numpy as np
import torch
import torch.nn as nn
from torch.optim import Adam


class BiGRU(nn.Module):
    def __init__(self, embedding_size, hidden, n_layers, dropout=0.0):
        super(BiGRU, self).__init__()
        self.rnn = nn.GRU(embedding_size, hidden, num_layers=n_layers,
                          bidirectional=True, dropout=dropout, batch_first=True)
        self.sigmoid = nn.Sigmoid()
        self.linear = nn.Linear(hidden * 2, 1)

    def forward(self, x):
        out, _ = self.rnn(x)
        prob = self.sigmoid(self.linear(out))
        return prob


class BertConfig:
    def __init__(self, vocab_size=300, hidden_size=64, num_hidden_layers=2, num_attention_heads=4):
        self.vocab_size, self.hidden_size = vocab_size, hidden_size
        self.num_hidden_layers, self.num_attention_heads = num_hidden_layers, num_attention_heads
        self.is_decoder = False

    def to_dict(self):
        return dict(self.__dict__)


class BertEmbeddings(nn.Module):
    def __init__(self, config, max_len=64):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
        self.position_embeddings = nn.Embedding(max_len, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(2, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size)
        self.dropout = nn.Dropout(0.1)

    def forward(self, input_ids=None, token_type_ids=None):
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        position_ids = torch.arange(input_ids.size(1)).unsqueeze(0).expand_as(input_ids)
        e = self.word_embeddings(input_ids) + self.position_embeddings(position_ids) + self.token_type_embeddings(token_type_ids)
        return self.dropout(self.LayerNorm(e))


class BertEncoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.layer = nn.ModuleList([nn.TransformerEncoderLayer(config.hidden_size, config.num_attention_heads,
                                                               4 * config.hidden_size, 0.1, batch_first=True)
                                    for _ in range(config.num_hidden_layers)])

    def forward(self, hidden_states, attention_mask=None, head_mask=None, encoder_hidden_states=None,
                encoder_attention_mask=None):
        key_padding = attention_mask[:, 0, 0, :] < -1.0 if attention_mask is not None else None
        for layer in self.layer:
            hidden_states = layer(hidden_states, src_key_padding_mask=key_padding)
        return (hidden_states,)


class BertModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        self.encoder = BertEncoder(config)


class BertTokenizer:
    mask_token_id = 103

    def convert_ids_to_tokens(self, ids):
        return [str(i) for i in ids]


class SoftMaskedBert(nn.Module):
    def __init__(self, bert, tokenizer, hidden, layer_n, device):
        super(SoftMaskedBert, self).__init__()
        self.embedding = bert.embeddings.to(device)
        self.config = bert.config
        embedding_size = self.config.to_dict()['hidden_size']
        self.detector = BiGRU(embedding_size, hidden, layer_n)
        self.corrector = bert.encoder
        mask_token_id = torch.tensor([[tokenizer.mask_token_id]]).to(device)
        self.mask_e = self.embedding(mask_token_id).detach()
        self.linear = nn.Linear(embedding_size, self.config.vocab_size)
        self.softmax = nn.LogSoftmax(dim=-1)

    def forward(self, input_ids, input_mask, segment_ids):
        e = self.embedding(input_ids=input_ids, token_type_ids=segment_ids)
        p = self.detector(e)
        e_ = p * self.mask_e + (1 - p) * e
        head_mask, encoder_hidden_states, encoder_extended_attention_mask = self._init_inputs(input_ids, input_mask)
        h = self.corrector(e_, attention_mask=encoder_extended_attention_mask, head_mask=head_mask,
                           encoder_hidden_states=encoder_hidden_states,
                           encoder_attention_mask=encoder_extended_attention_mask)
        h = h[0] + e
        out = self.softmax(self.linear(h))
        return out, p

    def _init_inputs(self, input_ids=None, attention_mask=None):
        input_shape = input_ids.size()
        if attention_mask is None:
            attention_mask = torch.ones(input_shape)
        encoder_extended_attention_mask = attention_mask[:, None, None, :]
        encoder_extended_attention_mask = encoder_extended_attention_mask.to(dtype=next(self.parameters()).dtype)
        encoder_extended_attention_mask = (1.0 - encoder_extended_attention_mask) * -10000.0
        head_mask = [None] * self.config.num_hidden_layers
        return head_mask, None, encoder_extended_attention_mask


class ScheduledOptim():
    def __init__(self, optimizer, d_model, n_warmup_steps):
        self._optimizer = optimizer
        self.n_warmup_steps = n_warmup_steps
        self.n_current_steps = 0
        self.init_lr = np.power(d_model, -0.5)

    def step_and_update_lr(self):
        self._update_learning_rate()
        self._optimizer.step()

    def zero_grad(self):
        self._optimizer.zero_grad()

    def _get_lr_scale(self):
        return np.min([np.power(self.n_current_steps, -0.5),
                       np.power(self.n_warmup_steps, -1.5) * self.n_current_steps])

    def _update_learning_rate(self):
        self.n_current_steps += 1
        lr = self.init_lr * self._get_lr_scale()
        for param_group in self._optimizer.param_groups:
            param_group['lr'] = lr


class SoftMaskedBertTrainer():
    def __init__(self, bert, tokenizer, device, hidden=256, layer_n=1, lr=2e-5, gama=0.8, betas=(0.9, 0.999),
                 weight_decay=0.01, warmup_steps=10000):
        self.device = device
        self.tokenizer = tokenizer
        self.model = SoftMaskedBert(bert, self.tokenizer, hidden, layer_n, self.device).to(self.device)
        optim = Adam(self.model.parameters(), lr=lr, betas=betas, weight_decay=weight_decay)
        self.optim_schedule = ScheduledOptim(optim, hidden, n_warmup_steps=warmup_steps)
        self.criterion_c = nn.NLLLoss()
        self.criterion_d = nn.BCELoss()
        self.gama = gama
        self.log_freq = 4

    def train(self, train_data, epoch):
        self.model.train()
        return self.iteration(epoch, train_data)

    def evaluate(self, val_data, epoch):
        self.model.eval()
        return self.iteration(epoch, val_data, train=False)

    def iteration(self, epoch, data_loader, train=True):
        str_code = "train" if train else "val"
        avg_loss = 0.0
        total_element = 0
        c_correct = 0
        d_correct = 0
        for i, data in enumerate(data_loader):
            data = {key: value.to(self.device) for key, value in data.items()}
            out, prob = self.model(data["input_ids"], data["input_mask"], data["segment_ids"])
            prob = prob.reshape(-1, prob.shape[1])
            loss_d = self.criterion_d(prob, data['label'].float())
            loss_c = self.criterion_c(out.transpose(1, 2), data["output_ids"])
            loss = self.gama * loss_c + (1 - self.gama) * loss_d
            if train:
                self.optim_schedule.zero_grad()
                loss.backward(retain_graph=True)
                self.optim_schedule.step_and_update_lr()
            out = out.argmax(dim=-1)
            c_correct += sum([out[i].equal(data['output_ids'][i]) for i in range(len(out))])
            prob = torch.round(prob).long()
            d_correct += sum([prob[i].equal(data['label'][i]) for i in range(len(prob))])
            avg_loss += loss.item()
            total_element += len(data)
            post_fix = {"epoch": epoch, "iter": i, "avg_loss": avg_loss / (i + 1),
                        "d_acc": d_correct / total_element, "c_acc": c_correct / total_element}
            if i % self.log_freq == 0:
                print(str(post_fix))
        print("EP%d_%s, avg_loss=" % (epoch, str_code), avg_loss / len(data_loader), "d_acc=",
              d_correct / total_element, "c_acc", c_correct / total_element)
        return avg_loss / len(data_loader)


torch.manual_seed(0)
config = BertConfig()
bert = BertModel(config)
trainer = SoftMaskedBertTrainer(bert, BertTokenizer(), torch.device("cpu"), hidden=64, warmup_steps=100)
batches = []
for _ in range(12):
    output_ids = torch.randint(1, 300, (8, 32))
    label = (torch.rand(8, 32) < 0.1).long()
    input_ids = torch.where(label.bool(), torch.randint(1, 300, (8, 32)), output_ids)
    batches.append({"input_ids": input_ids, "input_mask": torch.ones(8, 32, dtype=torch.long),
                    "segment_ids": torch.zeros(8, 32, dtype=torch.long), "output_ids": output_ids, "label": label})
for epoch in range(2):
    trainer.train(batches, epoch)
trainer.evaluate(batches, 2)
