# Source: https://github.com/e3nn/e3nn/issues/414
#   code: e3nn.nn.BatchNorm (e3nn/nn/_batchnorm.py), whose running statistics are rewritten
#   each training step with torch.cat(new_means, out=self.running_mean) and
#   torch.cat(new_vars, out=self.running_var), the lines the issue suspects of growing the
#   buffers every batch (the maintainer answers that cat with out= does not append)
# Adapted: o3.Irreps replaced by a minimal stand-in for "8x0e + 4x1o" (multiplicity, dimension
#   and is_scalar of each irrep); compile_mode and the fx-tracing checks dropped; the
#   equivariant network by Linear -> BatchNorm -> Linear trained with Adam on 60 batches of 32
#   random 16-feature inputs, then 10 evaluation batches; cpu, seeded.
import torch
from torch import nn


class _Ir:
    def __init__(self, l):
        self.l = l
        self.dim = 2 * l + 1

    def is_scalar(self):
        return self.l == 0


class Irreps(list):
    def __init__(self, spec):
        super().__init__((mul, _Ir(l)) for mul, l in spec)
        self.num_irreps = sum(mul for mul, _ in self)
        self.dim = sum(mul * ir.dim for mul, ir in self)


class BatchNorm(nn.Module):
    def __init__(self, irreps, eps=1e-5, momentum=0.1, affine=True, reduce="mean", instance=False,
                 normalization="component"):
        super().__init__()

        self.irreps = irreps
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.instance = instance

        num_scalar = sum(mul for mul, ir in self.irreps if ir.is_scalar())
        num_features = self.irreps.num_irreps

        if self.instance:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
        else:
            self.register_buffer("running_mean", torch.zeros(num_scalar))
            self.register_buffer("running_var", torch.ones(num_features))

        if affine:
            self.weight = nn.Parameter(torch.ones(num_features))
            self.bias = nn.Parameter(torch.zeros(num_scalar))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

        self.reduce = reduce
        irs = []
        for mul, ir in self.irreps:
            irs.append((mul, ir.dim, ir.is_scalar()))
        self.irs = irs
        self.normalization = normalization

    def _roll_avg(self, curr, update):
        return (1 - self.momentum) * curr + self.momentum * update.detach()

    def forward(self, input):
        orig_shape = input.shape
        batch = input.shape[0]
        dim = input.shape[-1]
        input = input.reshape(batch, -1, dim)  # [batch, sample, stacked features]

        if self.training and not self.instance:
            new_means = []
            new_vars = []

        fields = []
        ix = 0
        irm = 0
        irv = 0
        iw = 0
        ib = 0

        for (mul, d, is_scalar) in self.irs:
            field = input[:, :, ix: ix + mul * d]  # [batch, sample, mul * repr]
            ix += mul * d

            field = field.reshape(batch, -1, mul, d)

            if is_scalar:
                if self.training or self.instance:
                    if self.instance:
                        field_mean = field.mean(1).reshape(batch, mul)  # [batch, mul]
                    else:
                        field_mean = field.mean([0, 1]).reshape(mul)  # [mul]
                        new_means.append(self._roll_avg(self.running_mean[irm: irm + mul], field_mean))
                else:
                    field_mean = self.running_mean[irm: irm + mul]
                irm += mul

                field = field - field_mean.reshape(-1, 1, mul, 1)

            if self.training or self.instance:
                if self.normalization == "norm":
                    field_norm = field.pow(2).sum(3)  # [batch, sample, mul]
                else:
                    field_norm = field.pow(2).mean(3)  # [batch, sample, mul]

                if self.reduce == "mean":
                    field_norm = field_norm.mean(1)  # [batch, mul]
                else:
                    field_norm = field_norm.max(1).values  # [batch, mul]

                if not self.instance:
                    field_norm = field_norm.mean(0)  # [mul]
                    new_vars.append(self._roll_avg(self.running_var[irv: irv + mul], field_norm))
            else:
                field_norm = self.running_var[irv: irv + mul]
            irv += mul

            field_norm = (field_norm + self.eps).pow(-0.5)  # [(batch,) mul]

            if self.affine:
                weight = self.weight[iw: iw + mul]  # [mul]
                iw += mul

                field_norm = field_norm * weight  # [(batch,) mul]

            field = field * field_norm.reshape(-1, 1, mul, 1)  # [batch, sample, mul, repr]

            if self.affine and is_scalar:
                bias = self.bias[ib: ib + mul]  # [mul]
                ib += mul
                field += bias.reshape(mul, 1)  # [batch, sample, mul, repr]

            fields.append(field.reshape(batch, -1, mul * d))  # [batch, sample, mul * repr]

        if self.training and not self.instance:
            if len(new_means) > 0:
                torch.cat(new_means, out=self.running_mean)
            if len(new_vars) > 0:
                torch.cat(new_vars, out=self.running_var)

        output = torch.cat(fields, dim=2)  # [batch, sample, stacked features]
        return output.reshape(orig_shape)


torch.manual_seed(0)
irreps = Irreps([(8, 0), (4, 1)])
model = nn.Sequential(nn.Linear(16, irreps.dim), BatchNorm(irreps), nn.Linear(irreps.dim, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(60):
    x, y = torch.randn(32, 16), torch.randn(32, 1)
    loss = (model(x) - y).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 20 == 0:
        print(step, loss.item(), tuple(model[1].running_mean.shape), tuple(model[1].running_var.shape))
model.eval()
with torch.no_grad():
    for _ in range(10):
        out = model(torch.randn(32, 16))
print(out.shape, tuple(model[1].running_mean.shape))
