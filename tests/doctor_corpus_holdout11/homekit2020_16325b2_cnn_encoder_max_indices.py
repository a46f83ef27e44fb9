# Source: https://github.com/behavioral-data/Homekit2020/commit/16325b2c07110574b34ee2cc3597b40a703e4a5d
#   code: src/models/models.py (conv_l_out, get_final_conv_l_out, CNNEncoder, CNNToTransformerEncoder)
#   at the parent of that commit
# Adapted: CNNEncoder kept as it was; CNNToTransformerEncoder kept with its forward, encode and
#   training_step, as a plain nn.Module instead of a LightningModule (self.log, wandb and the
#   dataloader hooks dropped, on_train_epoch_end kept for its clean-up), modules.EncoderBlock replaced
#   by nn.TransformerEncoderLayer, modules.ClassificationModule by flatten + linear, the torchmetrics
#   collection by a small accuracy counter, build_loss_fn by CrossEntropyLoss; the Lightning fit loop
#   written out (3 epochs of 20 random batches of 16 day-long sequences, 720 steps x 8 features);
#   smaller sizes; cpu, seeded.
import numpy as np
import torch
import torch.nn as nn


def conv_l_out(l_in, kernel_size, stride, padding=0, dilation=1):
    return int(np.floor((l_in + 2 * padding - dilation * (kernel_size - 1) - 1) / stride + 1))


def get_final_conv_l_out(l_in, kernel_sizes, stride_sizes, max_pool_kernel_size=None, max_pool_stride_size=None):
    l_out = l_in
    for kernel_size, stride_size in zip(kernel_sizes, stride_sizes):
        l_out = conv_l_out(l_out, kernel_size, stride_size)
        if max_pool_kernel_size and max_pool_kernel_size:
            l_out = conv_l_out(l_out, max_pool_kernel_size, max_pool_stride_size)
    return int(l_out)


class CNNEncoder(nn.Module):
    def __init__(self, input_features, n_timesteps, kernel_sizes=[1], out_channels=[128],
                 stride_sizes=[1], max_pool_kernel_size=3, max_pool_stride_size=2) -> None:
        n_layers = len(kernel_sizes)
        assert len(out_channels) == n_layers
        assert len(stride_sizes) == n_layers
        self.out_channels = out_channels
        self.kernel_sizes = kernel_sizes
        self.stride_sizes = stride_sizes
        self.max_pool_stride_size = max_pool_stride_size
        self.max_pool_kernel_size = max_pool_kernel_size
        self.conv_output_sizes = []
        super().__init__()
        self.input_features = input_features
        layers = []
        l_out = n_timesteps
        for i in range(n_layers):
            in_channels = input_features if i == 0 else out_channels[i - 1]
            layers.append(nn.Conv1d(in_channels=in_channels, out_channels=out_channels[i],
                                    kernel_size=kernel_sizes[i], stride=stride_sizes[i]))
            layers.append(nn.ReLU())
            l_out = conv_l_out(l_out, kernel_sizes[i], stride_sizes[i])
            self.conv_output_sizes.append((l_out,))
            if max_pool_stride_size and max_pool_kernel_size:
                l_out = conv_l_out(l_out, max_pool_kernel_size, max_pool_stride_size)
                layers.append(nn.MaxPool1d(max_pool_kernel_size, stride=max_pool_stride_size, return_indices=True))
            layers.append(nn.LayerNorm([out_channels[i], l_out]))
        self.layers = nn.ModuleList(layers)
        self.final_output_length = get_final_conv_l_out(n_timesteps, kernel_sizes, stride_sizes,
                                                        max_pool_kernel_size=max_pool_kernel_size,
                                                        max_pool_stride_size=max_pool_stride_size)
        self.max_indices = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for l in self.layers:
            if isinstance(l, nn.MaxPool1d):
                x, indices = l(x)
                self.max_indices.append(indices)
            else:
                x = l(x)
        return x


class TorchMetricClassification:
    def __init__(self):
        self.reset()

    def update(self, preds, y):
        self.correct += (preds.argmax(-1) == y).sum().item()
        self.total += len(y)

    def compute(self):
        return {"train/acc": self.correct / max(self.total, 1)}

    def reset(self):
        self.correct, self.total = 0, 0


class CNNToTransformerEncoder(nn.Module):
    def __init__(self, input_features, num_attention_heads, num_hidden_layers, n_timesteps, kernel_sizes=[5, 3, 1],
                 out_channels=[256, 128, 64], stride_sizes=[2, 2, 2], dropout_rate=0.3, num_labels=2):
        super(CNNToTransformerEncoder, self).__init__()
        self.input_embedding = CNNEncoder(input_features, n_timesteps=n_timesteps, kernel_sizes=kernel_sizes,
                                          out_channels=out_channels, stride_sizes=stride_sizes)
        self.d_model = out_channels[-1]
        final_length = self.input_embedding.final_output_length
        self.positional_encoding = None
        self.blocks = nn.ModuleList([
            nn.TransformerEncoderLayer(self.d_model, num_attention_heads, 2 * self.d_model, dropout_rate,
                                       batch_first=True) for _ in range(num_hidden_layers)])
        self.is_classifier = True
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(self.d_model * final_length, num_labels))
        self.train_metrics = TorchMetricClassification()
        self.criterion = nn.CrossEntropyLoss()
        self.train_probs = []
        self.train_labels = []

    def forward(self, inputs_embeds, labels):
        encoding = self.encode(inputs_embeds)
        preds = self.head(encoding)
        loss = self.criterion(preds, labels)
        return loss, preds

    def encode(self, inputs_embeds):
        x = inputs_embeds.transpose(1, 2)
        x = self.input_embedding(x)
        x = x.transpose(1, 2)
        for l in self.blocks:
            x = l(x)
        return x

    def training_step(self, batch, batch_idx):
        x = batch["inputs_embeds"]
        y = batch["label"]
        loss, preds = self.forward(x, y)
        self.train_metrics.update(preds, y)
        if self.is_classifier:
            self.train_probs.append(preds.detach().cpu())
            self.train_labels.append(y.detach().cpu())
        return {"loss": loss, "preds": preds, "labels": y}

    def on_train_epoch_end(self):
        metrics = self.train_metrics.compute()
        print(metrics)
        self.train_metrics.reset()
        self.train_probs = []
        self.train_labels = []


torch.manual_seed(0)
model = CNNToTransformerEncoder(input_features=8, num_attention_heads=2, num_hidden_layers=1, n_timesteps=720,
                                kernel_sizes=[5, 3, 1], out_channels=[64, 32, 16], stride_sizes=[2, 2, 2])
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
train_batches = [{"inputs_embeds": torch.randn(16, 720, 8), "label": torch.randint(0, 2, (16,))} for _ in range(20)]
for epoch in range(3):
    model.train()
    for batch_idx, batch in enumerate(train_batches):
        out = model.training_step(batch, batch_idx)
        optimizer.zero_grad()
        out["loss"].backward()
        optimizer.step()
    model.on_train_epoch_end()
