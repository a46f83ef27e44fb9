# Source: https://github.com/idiap/fullgrad-saliency/issues/11
#   code: saliency/tensor_extractor.py (FullGradExtractor), saliency/simple_fullgrad.py
#   (SimpleFullGrad), saliency/grad.py (InputGradient) and dump_images.py at commit 7c106b3
# Adapted: FullGradExtractor, SimpleFullGrad and InputGradient kept as they are (SimpleFullGrad
#   without its unused im_size checks); dump_images.py kept with the methods the report uses
#   (simple_fullgrad, and inputgrad from the same dict) run on the images one by one as the
#   reporter did; save_saliency_map keeps its numpy normalisation but not the cv2 resize, the
#   colormap and the file write (cv2 not installed); the pretrained ResNet-18 -> a small conv
#   net with batch norm and a linear head; the image folder -> 60 random 3x64x64 images; cpu,
#   seeded.
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class FullGradExtractor:
    #Extract tensors needed for FullGrad using hooks

    def __init__(self, model, im_size = (3,224,224)):
        self.model = model
        self.im_size = im_size

        self.biases = []
        self.feature_grads = []
        self.grad_handles = []

        # Iterate through layers
        for m in self.model.modules():
            if isinstance(m, nn.Conv2d) or isinstance(m, nn.Linear) or isinstance(m, nn.BatchNorm2d):

                # Register feature-gradient hooks for each layer
                handle_g = m.register_backward_hook(self._extract_layer_grads)
                self.grad_handles.append(handle_g)

                # Collect model biases
                b = self._extract_layer_bias(m)
                if (b is not None): self.biases.append(b)

    def _extract_layer_bias(self, module):
        if isinstance(module, nn.BatchNorm2d):
            b = - (module.running_mean * module.weight
                    / torch.sqrt(module.running_var + module.eps)) + module.bias
            return b.data
        elif module.bias is None:
            return None
        else:
            return module.bias.data

    def getBiases(self):
        # dummy function to get biases
        return self.biases

    def _extract_layer_grads(self, module, in_grad, out_grad):
        # function to collect the gradient outputs
        # from each layer

        if not module.bias is None:
            self.feature_grads.append(out_grad[0])

    def getFeatureGrads(self, x, output_scalar):

        # Empty feature grads list
        self.feature_grads = []

        self.model.zero_grad()
        # Gradients w.r.t. input
        input_gradients = torch.autograd.grad(outputs = output_scalar, inputs = x)[0]

        return input_gradients, self.feature_grads


class SimpleFullGrad():
    """
    Compute simple FullGrad saliency map
    """

    def __init__(self, model, im_size = (3,224,224) ):
        self.model = model
        self.model_ext = FullGradExtractor(model, im_size)

    def _getGradients(self, image, target_class=None):
        self.model.eval()
        image = image.requires_grad_()
        out = self.model(image)

        if target_class is None:
            target_class = out.data.max(1, keepdim=True)[1]

        output_scalar = -1. * F.nll_loss(out, target_class.flatten(), reduction='sum')

        return self.model_ext.getFeatureGrads(image, output_scalar)

    def _postProcess(self, input, eps=1e-6):
        # Absolute value
        input = abs(input)

        # Rescale operations to ensure gradients lie between 0 and 1
        flatin = input.view((input.size(0),-1))
        temp, _ = flatin.min(1, keepdim=True)
        input = input - temp.unsqueeze(1).unsqueeze(1)

        flatin = input.view((input.size(0),-1))
        temp, _ = flatin.max(1, keepdim=True)
        input = input / (temp.unsqueeze(1).unsqueeze(1) + eps)
        return input

    def saliency(self, image, target_class=None):
        #Simple FullGrad saliency

        self.model.eval()
        input_grad, intermed_grad = self._getGradients(image, target_class=target_class)

        im_size = image.size()

        # Input-gradient * image
        grd = input_grad * image
        gradient = self._postProcess(grd).sum(1, keepdim=True)
        cam = gradient

        # Aggregate Intermediate-gradients
        for i in range(len(intermed_grad)):

            # Select only Conv layers
            if len(intermed_grad[i].size()) == len(im_size):
                temp = self._postProcess(intermed_grad[i])
                gradient = F.interpolate(temp, size=(im_size[2], im_size[3]), mode = 'bilinear', align_corners=True)
                cam += gradient.sum(1, keepdim=True)

        return cam


class InputGradient():
    """
    Compute input-gradient saliency map
    """

    def __init__(self, model, loss=False):
        self.model = model
        self.loss = loss

    def _getGradients(self, image, target_class=None):
        image = image.requires_grad_()
        outputs = self.model(image)

        if target_class is None:
            target_class = (outputs.data.max(1, keepdim=True)[1]).flatten()

        if self.loss:
            outputs = torch.log_softmax(outputs, 1)
            agg = F.nll_loss(outputs, target_class, reduction='sum')
        else:
            agg = -1. * F.nll_loss(outputs, target_class, reduction='sum')

        self.model.zero_grad()
        # Gradients w.r.t. input and features
        gradients = torch.autograd.grad(outputs = agg, inputs = image, only_inputs=True, retain_graph=False)[0]

        # First element in the feature list is the image
        return gradients

    def saliency(self, image, target_class=None):

        self.model.eval()
        input_grad = self._getGradients(image, target_class=target_class)
        return torch.abs(input_grad).sum(1, keepdim=True)


def save_saliency_map(image, saliency_map, filename):
    image = image.data.cpu().numpy()
    saliency_map = saliency_map.data.cpu().numpy()

    saliency_map = saliency_map - saliency_map.min()
    saliency_map = saliency_map / saliency_map.max()
    saliency_map = saliency_map.clip(0,1)

    saliency_map = np.uint8(saliency_map * 255).transpose(1, 2, 0)
    image = np.uint8(image.clip(0, 1) * 255).transpose(1,2,0)
    return image, saliency_map


torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                      nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))

# Initialize saliency methods
saliency_methods = {
'simple_fullgrad': SimpleFullGrad(model, im_size=(3, 64, 64)),
'inputgrad': InputGradient(model),
}

images = [torch.rand(3, 64, 64) for _ in range(60)]
save_path = 'results/'


def compute_saliency_and_save():
    for batch_idx, image in enumerate(images):
        data = image.unsqueeze(0).requires_grad_()

        # Compute saliency maps for the input data
        for s in saliency_methods:
            saliency_map = saliency_methods[s].saliency(data)

            # Save saliency maps
            for i in range(data.size(0)):
                filename = save_path + str( (batch_idx+1) * (i+1))
                save_saliency_map(data[i], saliency_map[i], filename + '_' + s + '.jpg')


compute_saliency_and_save()
print('Saliency maps computed.')
