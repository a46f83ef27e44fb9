# Source: https://github.com/jacobgil/pytorch-grad-cam/issues/117
#   code: pytorch_grad_cam/activations_and_gradients.py, base_cam.py and grad_cam_plusplus.py
#   at commit c009ada (the release of the date)
# Adapted: ActivationsAndGradients, BaseCAM and GradCAMPlusPlus copied without comments and
#   docstrings (the augmentation path, which needs ttach, and the eigen_smooth SVD dropped);
#   cv2 replaced by a stub with resize (F.interpolate), COLORMAP_JET, cvtColor and an imwrite
#   that writes nothing, show_cam_on_image by a small overlay with the same signature; the
#   issue's cam_extractor kept; its training loop ("sth below") written as a plain epoch loop
#   over a classifier whose last activations sit in network.lastact, calling cam_extractor on
#   one validation image after every epoch; 6 random batches of 8 3x32x32 images, 4 classes,
#   12 epochs, SGD, use_cuda=False; cpu, seeded.
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class cv2:
    COLORMAP_JET = 2
    COLOR_RGB2BGR = 4

    @staticmethod
    def resize(img, dsize):
        t = torch.from_numpy(np.ascontiguousarray(img, dtype=np.float32))[None, None]
        return F.interpolate(t, size=(dsize[1], dsize[0]), mode='bilinear',
                             align_corners=False)[0, 0].numpy()

    @staticmethod
    def cvtColor(img, code):
        return img[..., ::-1]

    @staticmethod
    def imwrite(path, img):
        return True


def show_cam_on_image(img, mask, use_rgb=False, colormap=cv2.COLORMAP_JET):
    heatmap = np.stack([mask, mask * 0.5, 1.0 - mask], axis=-1)
    cam = heatmap + img
    cam = cam / np.max(cam)
    return np.uint8(255 * cam)


class ActivationsAndGradients:

    def __init__(self, model, target_layer, reshape_transform):
        self.model = model
        self.gradients = []
        self.activations = []
        self.reshape_transform = reshape_transform

        target_layer.register_forward_hook(self.save_activation)
        target_layer.register_backward_hook(self.save_gradient)

    def save_activation(self, module, input, output):
        activation = output
        if self.reshape_transform is not None:
            activation = self.reshape_transform(activation)
        self.activations.append(activation.cpu().detach())

    def save_gradient(self, module, grad_input, grad_output):
        grad = grad_output[0]
        if self.reshape_transform is not None:
            grad = self.reshape_transform(grad)
        self.gradients = [grad.cpu().detach()] + self.gradients

    def __call__(self, x):
        self.gradients = []
        self.activations = []
        return self.model(x)


class BaseCAM:
    def __init__(self,
                 model,
                 target_layer,
                 use_cuda=False,
                 reshape_transform=None):
        self.model = model.eval()
        self.target_layer = target_layer
        self.cuda = use_cuda
        if self.cuda:
            self.model = model.cuda()
        self.reshape_transform = reshape_transform
        self.activations_and_grads = ActivationsAndGradients(self.model,
            target_layer, reshape_transform)

    def get_cam_weights(self,
                        input_tensor,
                        target_category,
                        activations,
                        grads):
        raise Exception("Not Implemented")

    def get_loss(self, output, target_category):
        loss = 0
        for i in range(len(target_category)):
            loss = loss + output[i, target_category[i]]
        return loss

    def get_cam_image(self,
                      input_tensor,
                      target_category,
                      activations,
                      grads,
                      eigen_smooth=False):
        weights = self.get_cam_weights(input_tensor, target_category, activations, grads)
        weighted_activations = weights[:, :, None, None] * activations
        cam = weighted_activations.sum(axis=1)
        return cam

    def forward(self, input_tensor, target_category=None, eigen_smooth=False):

        if self.cuda:
            input_tensor = input_tensor.cuda()

        output = self.activations_and_grads(input_tensor)

        if type(target_category) is int:
            target_category = [target_category] * input_tensor.size(0)

        if target_category is None:
            target_category = np.argmax(output.cpu().data.numpy(), axis=-1)
        else:
            assert(len(target_category) == input_tensor.size(0))

        self.model.zero_grad()
        loss = self.get_loss(output, target_category)
        loss.backward(retain_graph=True)

        activations = self.activations_and_grads.activations[-1].cpu().data.numpy()
        grads = self.activations_and_grads.gradients[-1].cpu().data.numpy()

        cam = self.get_cam_image(input_tensor, target_category,
            activations, grads, eigen_smooth)

        cam = np.maximum(cam, 0)

        result = []
        for img in cam:
            img = cv2.resize(img, input_tensor.shape[-2:][::-1])
            img = img - np.min(img)
            img = img / np.max(img)
            result.append(img)
        result = np.float32(result)
        return result

    def __call__(self,
                 input_tensor,
                 target_category=None,
                 aug_smooth=False,
                 eigen_smooth=False):
        return self.forward(input_tensor,
            target_category, eigen_smooth)


class GradCAMPlusPlus(BaseCAM):
    def __init__(self, model, target_layer, use_cuda=False,
        reshape_transform=None):
        super(GradCAMPlusPlus, self).__init__(model, target_layer, use_cuda,
            reshape_transform)

    def get_cam_weights(self, input_tensor,
                              target_category,
                              activations,
                              grads):
        grads_power_2 = grads**2
        grads_power_3 = grads_power_2*grads
        sum_activations = np.sum(activations, axis=(2, 3))
        eps = 0.000001
        aij = grads_power_2 / (2*grads_power_2 +
            sum_activations[:, :, None, None]*grads_power_3 + eps)
        aij = np.where(grads != 0, aij, 0)

        weights = np.maximum(grads, 0)*aij
        weights = np.sum(weights, axis=(2, 3))
        return weights


def cam_extractor(network, input_tensor, rgb_img):

    target_layer = network.lastact[-1]
    cam = GradCAMPlusPlus(model=network, target_layer=target_layer, use_cuda=False)
    target_category = 3
    grayscale_cam = cam(input_tensor=input_tensor,
                        target_category=target_category,
                        aug_smooth=False,
                        eigen_smooth=False)

    grayscale_cam = grayscale_cam[0, :]
    cam_image = show_cam_on_image(rgb_img, grayscale_cam, use_rgb=True)

    cam_image = cv2.cvtColor(cam_image, cv2.COLOR_RGB2BGR)
    cv2.imwrite(f'{GradCAMPlusPlus}_cam.jpg', cam_image)
    return cam_image


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(32, 64, 3, padding=1))
        self.lastact = nn.ModuleList([nn.ReLU()])
        self.head = nn.Linear(64, 4)

    def forward(self, x):
        x = self.lastact[-1](self.features(x))
        return self.head(x.mean(dim=(2, 3)))


torch.manual_seed(0)
network = Net()
optimizer = torch.optim.SGD(network.parameters(), lr=0.01, momentum=0.9)
criterion = nn.CrossEntropyLoss()
train_batches = [(torch.randn(8, 3, 32, 32), torch.randint(0, 4, (8,))) for _ in range(6)]
rgb_img = np.random.rand(32, 32, 3).astype(np.float32)
input_tensor = torch.from_numpy(rgb_img.transpose(2, 0, 1).copy())[None]

for epoch in range(12):
    network.train()
    for inputs, labels in train_batches:
        optimizer.zero_grad()
        loss = criterion(network(inputs), labels)
        loss.backward()
        optimizer.step()
    cam_image = cam_extractor(network, input_tensor, rgb_img)
    print(epoch, loss.item(), cam_image.shape)
