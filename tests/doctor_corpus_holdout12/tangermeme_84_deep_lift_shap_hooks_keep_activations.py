# Source: https://github.com/jmschrei/tangermeme/pull/84
#   code: tangermeme/deep_lift_shap.py (deep_lift_shap and its hooks) at 468580a, before the pull request
# Adapted: deep_lift_shap is cut down to its hook mechanics and batch loop (no autocast, args, input
# validation, convergence warnings or return_references; hypothetical_attributions and the ReLU rule
# kept), dinucleotide_shuffle is replaced by a random permutation of positions, the pretrained BPNet
# models by 8 small convolutional folds with random weights; 24 one-hot sequences of length 500, 4
# shuffles each, attributed with every fold in turn on CPU (no training).
import torch


def hypothetical_attributions(multipliers, inputs, baselines):
    projected_contribs = torch.zeros_like(baselines[0], dtype=inputs[0].dtype)
    for i in range(inputs[0].shape[1]):
        hypothetical_input = torch.zeros_like(inputs[0], dtype=baselines[0].dtype)
        hypothetical_input[:, i] = 1.0
        hypothetical_input_minus_baseline = hypothetical_input - baselines[0]
        hypothetical_contribs = hypothetical_input_minus_baseline * multipliers[0]
        projected_contribs[:, i] = torch.sum(hypothetical_contribs, dim=1)
    return (projected_contribs,)


def _register_hooks(module):
    if len(module._backward_hooks) > 0:
        return
    if not isinstance(module, tuple(module._NON_LINEAR_OPS.keys())):
        return
    module.handles = []
    module.handles.append(module.register_forward_hook(_f_hook))
    module.handles.append(module.register_forward_pre_hook(_fp_hook))
    module.handles.append(module.register_full_backward_hook(_b_hook))


def _clear_hooks(module):
    if hasattr(module, "handles") and len(module.handles) > 0:
        for handle in module.handles:
            handle.remove()
        del module.handles


def _fp_hook(module, inputs):
    module.input = inputs[0].clone().detach()


def _f_hook(module, inputs, outputs):
    module.output = outputs.clone().detach()


def _b_hook(module, grad_input, grad_output):
    return module._NON_LINEAR_OPS[type(module)](module, grad_input, grad_output)


def _nonlinear(module, grad_input, grad_output):
    delta_in_ = torch.sub(*module.input.chunk(2))
    delta_out_ = torch.sub(*module.output.chunk(2))
    delta_in = torch.cat([delta_in_, delta_in_])
    delta_out = torch.cat([delta_out_, delta_out_])
    delta = delta_out / delta_in
    idxs = torch.abs(delta_in) < 1e-6
    return (torch.where(idxs, grad_input[0], grad_output[0] * delta),)


def shuffle_references(X, n=1):
    return torch.stack([torch.stack([x[:, torch.randperm(x.shape[-1])] for _ in range(n)]) for x in X])


def deep_lift_shap(model, X, target=0, batch_size=32, references=shuffle_references, n_shuffles=20,
                   hypothetical=False):
    _NON_LINEAR_OPS = {torch.nn.ReLU: _nonlinear}
    model.eval()
    try:
        for module in model.modules():
            module._NON_LINEAR_OPS = _NON_LINEAR_OPS
        model.apply(_register_hooks)
        attributions, Xi, rj, attr_ = [], [], [], []
        n, z = X.shape[0] * n_shuffles, 0
        for i in range(n):
            Xi.append(i // n_shuffles)
            rj.append(i % n_shuffles)
            if len(Xi) == batch_size or i == (n - 1):
                _X = X[Xi]
                _references = references(_X, n=1)[:, 0]
                _X = _X.requires_grad_()
                _references = _references.requires_grad_()
                X_ = torch.cat([_X, _references])
                with torch.autograd.set_grad_enabled(True):
                    y = model(X_)[:, target]
                    multipliers = torch.autograd.grad(y.sum(), _X)[0]
                multipliers = hypothetical_attributions((multipliers,), (_X,), (_references,))[0]
                attr_.extend(list(multipliers.cpu().detach()))
                while len(attr_) >= n_shuffles:
                    attr_chunk = torch.stack(attr_[:n_shuffles]).mean(dim=0)
                    if not hypothetical:
                        attr_chunk *= X[z].cpu()
                    attributions.append(attr_chunk)
                    attr_ = attr_[n_shuffles:]
                    z += 1
                Xi, rj = [], []
        return torch.stack(attributions)
    finally:
        model.apply(_clear_hooks)
        for module in model.modules():
            if hasattr(module, "_NON_LINEAR_OPS"):
                del module._NON_LINEAR_OPS


class BPNet(torch.nn.Module):
    def __init__(self, n_filters=32, n_layers=3):
        super().__init__()
        self.iconv = torch.nn.Conv1d(4, n_filters, kernel_size=21, padding=10)
        self.irelu = torch.nn.ReLU()
        self.rconvs = torch.nn.ModuleList([torch.nn.Conv1d(n_filters, n_filters, kernel_size=3, padding=2 ** i,
                                                           dilation=2 ** i) for i in range(1, n_layers + 1)])
        self.rrelus = torch.nn.ModuleList([torch.nn.ReLU() for _ in range(n_layers)])
        self.linear = torch.nn.Linear(n_filters, 1)

    def forward(self, X):
        X = self.irelu(self.iconv(X))
        for conv, relu in zip(self.rconvs, self.rrelus):
            X = X + relu(conv(X))
        return self.linear(X.mean(dim=-1))


X = torch.zeros(24, 4, 500)
X[torch.arange(24)[:, None], torch.randint(0, 4, (24, 500)), torch.arange(500)[None, :]] = 1.0
models = [BPNet() for fold in range(8)]
fold_attributions = []
for fold, model in enumerate(models):
    attr = deep_lift_shap(model, X, batch_size=16, n_shuffles=4)
    fold_attributions.append(attr)
    print(fold, attr.shape, float(attr.abs().sum()))
mean_attr = torch.stack(fold_attributions).mean(dim=0)
