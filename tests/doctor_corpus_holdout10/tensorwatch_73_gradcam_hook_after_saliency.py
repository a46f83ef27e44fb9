# Source: https://github.com/microsoft/tensorwatch/issues/73
#   code: tensorwatch/saliency/gradcam.py, saliency/backprop.py (VanillaGradExplainer),
#   saliency/saliency.py (get_saliency, get_image_saliency_results), imagenet_utils.predict and
#   pytorch_utils.batch_predict at commit 07139de, the parent of the fix 8e81b68
# Adapted: GradCAMExplainer, VanillaGradExplainer._backprop, _get_explainer (gradcam and
#   vanilla_grad only), _get_layer_path, get_saliency, get_image_saliency_results and the
#   predict helpers kept as they are; the report's test kept (saliency with methods=["gradcam"]
#   once, then repeated predict under torch.no_grad()), 1000 -> 300 predictions; the image
#   transforms (torchvision) -> images given as 3x64x64 tensors; resnet101 -> a small network
#   of class ResNet with an avgpool stage (the layer tensorwatch picks for ResNets); cpu, seeded.
import torch
import torch.nn as nn
import torch.nn.functional as F


class VanillaGradExplainer(object):
    def __init__(self, model):
        self.model = model

    def _backprop(self, inp, ind):
        inp.requires_grad = True
        if inp.grad is not None:
            inp.grad.zero_()
        if ind.grad is not None:
            ind.grad.zero_()
        self.model.eval()
        self.model.zero_grad()

        output = self.model(inp)
        if ind is None:
            ind = output.max(1)[1]
        grad_out = output.clone()
        grad_out.fill_(0.0)
        grad_out.scatter_(1, ind.unsqueeze(0).t(), 1.0)
        output.backward(grad_out)
        return inp.grad

    def explain(self, inp, ind=None, raw_inp=None):
        return self._backprop(inp, ind)


def _get_layer(model, key_list):
    if key_list is None:
        return None

    a = model
    for key in key_list:
        a = a._modules[key]
    return a


class GradCAMExplainer(VanillaGradExplainer):
    def __init__(self, model, target_layer_name_keys=None, use_inp=False):
        super(GradCAMExplainer, self).__init__(model)
        self.target_layer = _get_layer(model, target_layer_name_keys)
        self.use_inp = use_inp
        self.intermediate_act = []
        self.intermediate_grad = []
        self._register_forward_backward_hook()

    def _register_forward_backward_hook(self):
        def forward_hook_input(m, i, o):
            self.intermediate_act.append(i[0].data.clone())

        def forward_hook_output(m, i, o):
            self.intermediate_act.append(o.data.clone())

        def backward_hook(m, grad_i, grad_o):
            self.intermediate_grad.append(grad_o[0].data.clone())

        if self.target_layer is not None:
            if self.use_inp:
                self.target_layer.register_forward_hook(forward_hook_input)
            else:
                self.target_layer.register_forward_hook(forward_hook_output)

            self.target_layer.register_backward_hook(backward_hook)

    def _reset_intermediate_lists(self):
        self.intermediate_act = []
        self.intermediate_grad = []

    def explain(self, inp, ind=None, raw_inp=None):
        self._reset_intermediate_lists()

        _ = super(GradCAMExplainer, self)._backprop(inp, ind)

        if len(self.intermediate_grad):
            grad = self.intermediate_grad[0]
            act = self.intermediate_act[0]

            weights = grad.sum(-1).sum(-1).unsqueeze(-1).unsqueeze(-1)
            cam = weights * act
            cam = cam.sum(1).unsqueeze(1)

            cam = torch.clamp(cam, min=0)

            return cam
        else:
            return None


def _get_explainer(explainer_name, model, layer_path=None):
    if explainer_name == 'gradcam':
        return GradCAMExplainer(model, target_layer_name_keys=layer_path, use_inp=True)
    if explainer_name == 'vanilla_grad':
        return VanillaGradExplainer(model)

    raise ValueError('Explainer {} is not recognized'.format(explainer_name))


def _get_layer_path(model):
    if model.__class__.__name__ == 'ResNet':
        return ['avgpool'] #layer4
    else: #TODO: guess layer for other networks?
        return None


def get_saliency(model, raw_input, input, label, method='integrate_grad', layer_path=None):
    device = torch.device("cpu")

    model.to(device)
    input = input.to(device)
    if label is not None:
        label = label.to(device)

    if input.grad is not None:
        input.grad.zero_()
    if label is not None and label.grad is not None:
        label.grad.zero_()
    model.eval()
    model.zero_grad()

    layer_path = layer_path or _get_layer_path(model)

    exp = _get_explainer(method, model, layer_path)
    saliency = exp.explain(input, label, raw_input)

    if saliency is not None:
        saliency = saliency.abs().sum(dim=1)[0].squeeze()
        saliency -= saliency.min()
        saliency /= (saliency.max() + 1e-20)

        return saliency.detach().cpu().numpy()
    else:
        return None


def get_image_saliency_results(model, raw_image, input, label, methods=['gradcam'], layer_path=None):
    results = []
    for method in methods:
        sal = get_saliency(model, raw_image, input, label, method=method)

        if sal is not None:
            results.append((raw_image, sal, method))
    return results


def batch_predict(model, inputs, input_transform=None, device=None):
    if input_transform:
        batch = torch.stack(tuple(input_transform(i) for i in inputs), dim=0)
    else:
        batch = torch.stack(inputs, dim=0)

    device = device or torch.device("cpu")
    model.eval()
    model.to(device)
    batch = batch.to(device)

    outputs = model(batch)

    return outputs


def predict(model, images, image_transform=None, device=None):
    logits = batch_predict(model, images, input_transform=image_transform, device=device)
    probs = F.softmax(logits, dim=1) #2-dim array, one column per class, one row per input
    return probs


class ResNet(nn.Module):
    def __init__(self, num_classes=1000):
        super(ResNet, self).__init__()
        self.layer1 = nn.Sequential(nn.Conv2d(3, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU())
        self.layer4 = nn.Sequential(nn.Conv2d(32, 128, 3, stride=2, padding=1), nn.BatchNorm2d(128), nn.ReLU())
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(128, num_classes)

    def forward(self, x):
        x = self.avgpool(self.layer4(self.layer1(x)))
        return self.fc(torch.flatten(x, 1))


torch.manual_seed(0)
model = ResNet()
img = torch.rand(3, 64, 64)
input_tensor = img.unsqueeze(0)
prediction_tensor = torch.tensor([239])

# gradcam
results = get_image_saliency_results(model, img, input_tensor, prediction_tensor, methods=["gradcam"])

# TEST
for _ in range(300):
    with torch.no_grad():
        probabilities = predict(model=model, images=[img])
print(probabilities.argmax().item())
