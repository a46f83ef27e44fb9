# Source: https://github.com/KevinMusgrave/pytorch-metric-learning/issues/421
#   code: CrossBatchMemory (src/pytorch_metric_learning/losses/cross_batch_memory.py) with the
#   reporter's settings (memory_size 1024, batch size 8 in the report): the memory is a
#   fixed-size tensor written in place with embeddings.detach(), which the maintainer answers
#   cannot grow, while the reporter sees RAM grow during the first epoch
# Adapted: ModuleWithRecords, c_f.to_device and the loss_and_miner_utils helpers reduced to
#   what forward() uses (get_all_pairs_indices, remove_self_comparisons); the wrapped loss is a
#   small contrastive loss on the all-pairs indices; the trunk is a small convolutional
#   embedder (256-d embeddings) on 120 batches of 32 random 3x32x32 images with 40 labels,
#   trained with Adam; cpu, seeded.
import torch
import torch.nn as nn
import torch.nn.functional as F


def get_all_pairs_indices(labels, ref_labels):
    matches = (labels.unsqueeze(1) == ref_labels.unsqueeze(0)).byte()
    diffs = matches ^ 1
    a1_idx, p_idx = torch.where(matches)
    a2_idx, n_idx = torch.where(diffs)
    return a1_idx, p_idx, a2_idx, n_idx


def remove_self_comparisons(indices_tuple, curr_batch_idx, ref_size):
    a1, p, a2, n = indices_tuple
    keep = curr_batch_idx[a1] != p
    return a1[keep], p[keep], a2, n


class ContrastiveLoss(nn.Module):
    def __init__(self, pos_margin=0.0, neg_margin=1.0):
        super().__init__()
        self.pos_margin, self.neg_margin = pos_margin, neg_margin

    def forward(self, embeddings, labels, indices_tuple, ref_emb, ref_labels):
        a1, p, a2, n = indices_tuple
        emb, ref = F.normalize(embeddings, dim=1), F.normalize(ref_emb, dim=1)
        pos = F.relu((emb[a1] - ref[p]).norm(dim=1) - self.pos_margin)
        neg = F.relu(self.neg_margin - (emb[a2] - ref[n]).norm(dim=1))
        return pos.mean() + neg.mean()


class CrossBatchMemory(nn.Module):
    def __init__(self, loss, embedding_size, memory_size=1024, miner=None):
        super().__init__()
        self.loss = loss
        self.miner = miner
        self.embedding_size = embedding_size
        self.memory_size = memory_size
        self.reset_queue()

    def forward(self, embeddings, labels, indices_tuple=None, enqueue_idx=None):
        device = embeddings.device
        self.embedding_memory = self.embedding_memory.to(device=device, dtype=embeddings.dtype)
        self.label_memory = self.label_memory.to(device=device, dtype=labels.dtype)
        emb_for_queue = embeddings
        labels_for_queue = labels
        do_remove_self_comparisons = True

        batch_size = len(embeddings)
        queue_batch_size = len(emb_for_queue)
        self.add_to_memory(emb_for_queue, labels_for_queue, queue_batch_size)

        if not self.has_been_filled:
            E_mem = self.embedding_memory[: self.queue_idx]
            L_mem = self.label_memory[: self.queue_idx]
        else:
            E_mem = self.embedding_memory
            L_mem = self.label_memory

        indices_tuple = get_all_pairs_indices(labels, L_mem)
        if do_remove_self_comparisons:
            indices_tuple = remove_self_comparisons(indices_tuple, self.curr_batch_idx, self.memory_size)
        loss = self.loss(embeddings, labels, indices_tuple, E_mem, L_mem)
        return loss

    def add_to_memory(self, embeddings, labels, batch_size):
        self.curr_batch_idx = (
            torch.arange(self.queue_idx, self.queue_idx + batch_size, device=labels.device) % self.memory_size
        )
        self.embedding_memory[self.curr_batch_idx] = embeddings.detach()
        self.label_memory[self.curr_batch_idx] = labels.detach()
        prev_queue_idx = self.queue_idx
        self.queue_idx = (self.queue_idx + batch_size) % self.memory_size
        if (not self.has_been_filled) and (self.queue_idx <= prev_queue_idx):
            self.has_been_filled = True

    def reset_queue(self):
        self.embedding_memory = torch.zeros(self.memory_size, self.embedding_size)
        self.label_memory = torch.zeros(self.memory_size).long()
        self.has_been_filled = False
        self.queue_idx = 0


torch.manual_seed(0)
out_embedding_size = 256
memory_size = 1024
trunk = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 64, 3, stride=2, padding=1),
                      nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, out_embedding_size))
loss_func = CrossBatchMemory(ContrastiveLoss(), out_embedding_size, memory_size=memory_size)
optimizer = torch.optim.Adam(trunk.parameters(), lr=1e-4)
for i in range(120):
    data, labels = torch.randn(32, 3, 32, 32), torch.randint(0, 40, (32,))
    embeddings = trunk(data)
    loss = loss_func(embeddings, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if i % 30 == 0:
        print(i, loss.item(), loss_func.queue_idx, loss_func.has_been_filled)
