# Source: https://github.com/meta-pytorch/torchforge/pull/71
# Adapted: ForgeSFTRecipe.forward_backward (its non-pipeline path), train_step and train of
#   apps/sft/main.py at the parent of the pull request's commit; the torchtitan engine
#   around them (model parts, parallel dims, train context, amp, checkpointer, lr schedulers,
#   optimizers container) is stubbed with the same interface around a small next-token model
#   (embedding + GRU + linear head instead of Llama), the SFT data set -> random token ids,
#   batch 4 x 64 tokens, 60 steps, validation off, cuda -> cpu, seeded.
import contextlib

import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

torch.manual_seed(0)


class TinyLM(nn.Module):
    def __init__(self, vocab=512, dim=64):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, dim)
        self.layers = nn.GRU(dim, dim, batch_first=True)
        self.output = nn.Linear(dim, vocab)

    def forward(self, tokens):
        h, _ = self.layers(self.tok_embeddings(tokens))
        return self.output(h)


class ParallelDims:
    pp_enabled = False
    cp_enabled = False


class OptimizersContainer:
    def __init__(self, model_parts, lr):
        self.optimizers = [torch.optim.AdamW(m.parameters(), lr=lr) for m in model_parts]

    def step(self):
        for optimizer in self.optimizers:
            optimizer.step()

    def zero_grad(self):
        for optimizer in self.optimizers:
            optimizer.zero_grad()


class LRSchedulersContainer:
    def __init__(self, optimizers):
        self.schedulers = [torch.optim.lr_scheduler.LambdaLR(o, lambda step: 1.0)
                           for o in optimizers.optimizers]

    def step(self):
        for scheduler in self.schedulers:
            scheduler.step()


class Checkpointer:
    def save(self, curr_step, last_step=False):
        pass


def loss_fn(pred, labels):
    return F.cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))


def sft_batches(vocab=512, batch_size=4, seq_len=64):
    while True:
        tokens = torch.randint(0, vocab, (batch_size, seq_len + 1))
        yield {"tokens": tokens[:, :-1], "labels": tokens[:, 1:]}


class ForgeSFTRecipe:
    def __init__(self, num_training_steps=60):
        self.model_parts = [TinyLM()]
        self.parallel_dims = ParallelDims()
        self.train_context = lambda cp_ctx: contextlib.nullcontext()
        self.maybe_enable_amp = contextlib.nullcontext()
        self.loss_fn = loss_fn
        self.optimizers = OptimizersContainer(self.model_parts, lr=1e-3)
        self.lr_schedulers = LRSchedulersContainer(self.optimizers)
        self.checkpointer = Checkpointer()
        self.train_dataloader = sft_batches()
        self.num_training_steps = num_training_steps
        self.current_step = 0

    def forward_backward(
        self,
        input_dict: dict[str, torch.Tensor],
        labels: torch.Tensor,
        do_backward: bool = True,
    ) -> torch.Tensor:
        model_parts = self.model_parts
        parallel_dims = self.parallel_dims

        inputs = input_dict["tokens"]
        optional_context_parallel_ctx = None

        # Non-PP forward / backward
        with self.train_context(optional_context_parallel_ctx):
            assert len(model_parts) == 1
            with self.maybe_enable_amp:
                pred = model_parts[0](inputs)
                loss = self.loss_fn(pred, labels)
            # need to free to before bwd to avoid peaking memory
            del pred
            if do_backward:
                loss.backward()

        return loss

    def train_step(self, batch) -> None:
        labels = batch.pop("labels")
        loss = self.forward_backward(batch, labels)
        self.pbar.update(1)
        self.pbar.set_description(f"{self.current_step}|Loss: {loss}")

        self.optimizers.step()
        self.lr_schedulers.step()

    def train(self) -> None:
        dataloader = iter(self.train_dataloader)
        self.optimizers.zero_grad()

        self.pbar = tqdm(
            initial=0,
            total=self.num_training_steps,
            desc=f"{self.current_step}",
        )

        while self.current_step < self.num_training_steps:
            batch = next(dataloader)
            # Move tensors to the appropriate device
            for k, v in batch.items():
                if isinstance(v, torch.Tensor):
                    batch[k] = v.to("cpu")
            self.train_step(batch)
            self.current_step += 1

            self.checkpointer.save(
                curr_step=self.current_step,
                last_step=self.current_step == self.num_training_steps,
            )


if __name__ == "__main__":
    recipe = ForgeSFTRecipe()
    recipe.train()
    grad_norm = sum(p.grad.norm() ** 2 for p in recipe.model_parts[0].parameters()) ** 0.5
    print("step", recipe.current_step, "grad norm", float(grad_norm))
