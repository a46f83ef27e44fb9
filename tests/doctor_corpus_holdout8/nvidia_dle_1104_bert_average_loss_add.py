# Source: https://github.com/NVIDIA/DeepLearningExamples/pull/1104
#   code: PyTorch/LanguageModeling/BERT/run_pretraining.py at ec5cb09e^, before the pull
#   request (SyncFreeStats, take_training_step, take_optimizer_step and the training loop of
#   main, as reported in issue 1102)
# Adapted: SyncFreeStats, take_training_step and take_optimizer_step kept as they are, except
#   that the host stats are not pinned (pin_memory needs an accelerator); main reduced to the
#   stats it registers and its training loop (no cuda graphs, no checkpoints, no distributed
#   all_reduce, dllogger -> print, torch.cuda.synchronize dropped; the optimizer_step stat,
#   which reads FusedLAMB's step tensor, left out); the BERT model and
#   BertPretrainingCriterion replaced by a small embedding + encoder layer with masked-LM and
#   next-sentence heads and the same call signature; FusedLAMB -> SGD with a tensor learning
#   rate, the warm-up scheduler -> LambdaLR, GradScaler disabled (fp16 off); batches of 8
#   random sequences of 32 tokens, gradient_accumulation_steps 2, log_freq 5,
#   steps_this_run 30, cpu, seeded.
import time
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F


class SyncFreeStats :
    def __init__(self) :
        self.host_stats = {}
        self.device_stats = {}
        self.device_funcs = {}

    def add_stat(self, name, dtype=torch.int32, device_tensor=None, device_func=None) :
        if device_tensor is not None :
            assert dtype == device_tensor.dtype, "Error: dtype do not match: {} {}".format(dtype, device_tensor.dtype)
        self.host_stats[name] = torch.zeros(1, dtype=dtype)
        self.device_stats[name] = device_tensor
        self.device_funcs[name] = device_func

    def copy_from_device(self) :
        for name in self.host_stats.keys() :
            # Apply device function to device stat
            if self.device_stats[name] is not None and self.device_funcs[name] is not None:
                self.host_stats[name].copy_(self.device_funcs[name](self.device_stats[name]), non_blocking=True)
            elif self.device_stats[name] is not None :
                self.host_stats[name].copy_(self.device_stats[name], non_blocking=True)
            elif self.device_funcs[name] is not None :
                self.host_stats[name].copy_(self.device_funcs[name](), non_blocking=True)

    def host_stat(self, name) :
        assert name in self.host_stats
        return self.host_stats[name]

    def host_stat_value(self, name) :
        assert name in self.host_stats
        return self.host_stats[name].item()

    def update_host_stat(self, name, tensor) :
        self.host_stats[name] = tensor

    def device_stat(self, name) :
        assert self.device_stats[name] is not None
        return self.device_stats[name]

    def update_device_stat(self, name, tensor) :
        self.device_stats[name] = tensor


class BertForPreTraining(nn.Module):
    def __init__(self, vocab_size=512, hidden=64):
        super().__init__()
        self.embeddings = nn.Embedding(vocab_size, hidden)
        self.token_type_embeddings = nn.Embedding(2, hidden)
        self.encoder = nn.TransformerEncoderLayer(hidden, 4, 4 * hidden, dropout=0.1, batch_first=True)
        self.cls_predictions = nn.Linear(hidden, vocab_size)
        self.cls_seq_relationship = nn.Linear(hidden, 2)

    def forward(self, input_ids, token_type_ids, attention_mask, masked_lm_labels=None):
        h = self.embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        h = self.encoder(h, src_key_padding_mask=attention_mask == 0)
        return self.cls_predictions(h), self.cls_seq_relationship(h[:, 0])


class BertPretrainingCriterion(nn.Module):
    def __init__(self, vocab_size):
        super().__init__()
        self.vocab_size = vocab_size

    def forward(self, prediction_scores, seq_relationship_score, masked_lm_labels, next_sentence_labels):
        masked_lm_loss = F.cross_entropy(prediction_scores.view(-1, self.vocab_size), masked_lm_labels.view(-1),
                                         ignore_index=-1)
        next_sentence_loss = F.cross_entropy(seq_relationship_score.view(-1, 2), next_sentence_labels.view(-1))
        return masked_lm_loss + next_sentence_loss


def take_training_step(args, grad_scaler, model, criterion, batch, stats):
    with torch.cuda.amp.autocast(enabled=(args.fp16 and not args.allreduce_post_accumulation_fp16)) :
        prediction_scores, seq_relationship_score = model(input_ids=batch['input_ids'], token_type_ids=batch['token_type_ids'], attention_mask=batch['attention_mask'], masked_lm_labels=batch['labels'])
        loss = criterion(prediction_scores, seq_relationship_score, batch['labels'], batch['next_sentence_labels'])

    stats.device_stat('average_loss').add_(loss)
    grad_scaler.scale(loss).backward()


def take_optimizer_step(args, lr_scheduler, optimizer, grad_scaler, device, stats):
    lr_scheduler.step()  # learning rate warmup
    grad_scaler.step(optimizer)

    # Stats copying is located here prior to the infinity check being reset
    # in GradScaler::update()
    stats.copy_from_device()

    grad_scaler.update()
    optimizer.zero_grad(set_to_none=True)


def make_batch(batch_size=8, seq_len=32, vocab_size=512):
    labels = torch.full((batch_size, seq_len), -1)
    labels[:, 1:6] = torch.randint(0, vocab_size, (batch_size, 5))
    return {'input_ids': torch.randint(0, vocab_size, (batch_size, seq_len)),
            'token_type_ids': torch.randint(0, 2, (batch_size, seq_len)),
            'attention_mask': torch.ones(batch_size, seq_len, dtype=torch.long), 'labels': labels,
            'next_sentence_labels': torch.randint(0, 2, (batch_size,))}


def main():
    args = SimpleNamespace(fp16=False, allreduce_post_accumulation_fp16=False, allreduce_post_accumulation=False,
                           gradient_accumulation_steps=2, log_freq=5, steps_this_run=30, cuda_graphs=False)
    torch.manual_seed(0)
    device = torch.device('cpu')
    model = BertForPreTraining()
    criterion = BertPretrainingCriterion(512)
    optimizer = torch.optim.SGD(model.parameters(), lr=torch.tensor(0.01))
    lr_scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / 10))
    grad_scaler = torch.amp.GradScaler('cuda', enabled=args.fp16)
    train_dataloader = [make_batch() for _ in range(20)]
    epoch = 0

    stats = SyncFreeStats()
    stats.add_stat('model_step')
    stats.add_stat('average_loss', dtype=torch.float32, device_tensor=torch.zeros(1, dtype=torch.float32, device=device))
    stats.add_stat('learning_rate', dtype=torch.float32, device_func=(lambda: optimizer.param_groups[0]['lr']))
    stats.add_stat('skip_optimizer_step', dtype=torch.float32)
    stats.add_stat('skipped_optimizer_steps', dtype=torch.float32)

    raw_train_start = time.time()
    while True:
        for step, batch in enumerate(train_dataloader):
            stats.host_stat('model_step').add_(1)
            grad_accumulation_step = (stats.host_stat_value('model_step') % args.gradient_accumulation_steps) != 0

            batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
            take_training_step(args, grad_scaler, model, criterion, batch, stats)

            if not grad_accumulation_step:
                take_optimizer_step(args, lr_scheduler, optimizer, grad_scaler, device, stats)

            if not grad_accumulation_step:
                static_optimizer_step = stats.host_stat_value('model_step') // args.gradient_accumulation_steps
                dynamic_optimizer_step = static_optimizer_step - int(stats.host_stat_value('skipped_optimizer_steps'))
                no_log_steps = static_optimizer_step % args.log_freq

                if static_optimizer_step >= args.steps_this_run:
                    last_num_steps = args.log_freq if no_log_steps == 0 else no_log_steps
                    stats.device_stat('average_loss').div_(last_num_steps * args.gradient_accumulation_steps)
                    stats.host_stat('average_loss').copy_(stats.device_stat('average_loss'))
                    print((epoch, dynamic_optimizer_step), {"final_loss": stats.host_stat_value('average_loss')})
                    return args, time.time() - raw_train_start, stats

                if no_log_steps == 0:
                    print((epoch, dynamic_optimizer_step),
                          {"average_loss": stats.host_stat_value('average_loss') / (args.log_freq * args.gradient_accumulation_steps),
                           "learning_rate": stats.host_stat_value('learning_rate')})
                    stats.device_stat('average_loss').zero_()

        epoch += 1


if __name__ == "__main__":
    main()
