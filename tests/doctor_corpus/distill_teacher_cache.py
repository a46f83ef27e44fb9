"""Knowledge distillation with the teacher's embeddings memoised per batch."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


def make_teacher(d_in=64, d_out=1024):
    torch.manual_seed(123)
    teacher = nn.Sequential(nn.Linear(d_in, 512), nn.GELU(), nn.Linear(512, d_out))
    for p in teacher.parameters():
        p.requires_grad_(False)
    return teacher.eval()


class Distiller:
    def __init__(self, teacher, student, lr=1e-3):
        self.teacher = teacher
        self.student = student
        self.optimizer = torch.optim.AdamW(student.parameters(), lr=lr)
        self.teacher_cache = {}

    def teacher_embeddings(self, key, x):
        if key not in self.teacher_cache:
            with torch.no_grad():
                self.teacher_cache[key] = self.teacher(x)
        return self.teacher_cache[key]

    def train_epoch(self, loader, epoch):
        total = 0.0
        for i, (x,) in enumerate(loader):
            target = self.teacher_embeddings((epoch, i), x)
            loss = F.mse_loss(self.student(x), target)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            total += loss.item()
        return total / len(loader)


def main():
    torch.manual_seed(0)
    loader = DataLoader(TensorDataset(torch.randn(1280, 64)), batch_size=64, shuffle=True)
    student = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 1024))
    distiller = Distiller(make_teacher(), student)
    for epoch in range(2):
        print(f"epoch {epoch} distill-loss {distiller.train_epoch(loader, epoch):.6f}")


if __name__ == "__main__":
    main()
