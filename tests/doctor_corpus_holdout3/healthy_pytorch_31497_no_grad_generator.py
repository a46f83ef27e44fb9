# Source: https://github.com/pytorch/pytorch/issues/31497
# Adapted: the speech model replaced by a small convolutional acoustic model that returns a dict
#   with 'log_probs', 'output_lengths' and 'loss' (CTC), the data loader by random batches of
#   the same 7-tuple layout, args.device -> cpu, the consumer (a loop over the generator that
#   counts the frames of each batch's greedy decoding) and its size (60 batches) added, the
#   memory print replaced by the count of batches seen, seeded.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Args:
    device = "cpu"


args = Args()


class AcousticModel(nn.Module):
    def __init__(self, num_input_features=40, num_classes=30):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv1d(num_input_features, 128, 5, padding=2), nn.ReLU(),
                                  nn.Conv1d(128, 128, 5, padding=2), nn.ReLU())
        self.out = nn.Conv1d(128, num_classes, 1)

    def forward(self, x, xlen, y=None, ylen=None):
        log_probs = F.log_softmax(self.out(self.conv(x)), dim=1)
        output_lengths = xlen
        loss = F.ctc_loss(log_probs.permute(2, 0, 1), y, output_lengths, ylen,
                          zero_infinity=True) if y is not None else None
        return dict(log_probs=log_probs, output_lengths=output_lengths, loss=loss)


def make_loader(n_batches, batch_size=8, frames=200):
    for b in range(n_batches):
        x = torch.randn(batch_size, 40, frames)
        xlen = torch.full((batch_size,), frames, dtype=torch.long)
        y = torch.randint(1, 30, (batch_size, 20))
        ylen = torch.full((batch_size,), 20, dtype=torch.long)
        yield "dev", ["utt%d_%d.wav" % (b, k) for k in range(batch_size)], [""] * batch_size, x, xlen, y, ylen


@torch.no_grad()
def apply_model(data_loader, model):
    for dataset_name_, audio_path_, reference_, x, xlen, y, ylen in data_loader:
        x, xlen, y, ylen = x.to(args.device), xlen.to(args.device), y.to(args.device), ylen.to(args.device)
        log_probs, output_lengths, loss = map(model(x, xlen, y = y, ylen = ylen).get, ['log_probs', 'output_lengths', 'loss'])
        yield log_probs


torch.manual_seed(0)
model = AcousticModel()
model.eval()
n_frames = 0
for i, log_probs in enumerate(apply_model(make_loader(60), model)):
    n_frames += log_probs.argmax(dim=1).numel()
    if i % 20 == 0:
        print(i, log_probs.requires_grad)
print(n_frames, "frames decoded")
