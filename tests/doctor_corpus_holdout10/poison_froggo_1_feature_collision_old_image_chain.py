# Source: https://github.com/LostOxygen/poison_froggo/issues/1
#   code: poison_frog/dataset.py (forward_step, backward_step, create_perturbed_dataset) at
#   commit 2290e7f, before the fix the issue led to
# Adapted: forward_step, backward_step and the attack loop of create_perturbed_dataset kept
#   as they are (the never-reached adam branch dropped); the fine-tuned inception_v3 -> a small
#   conv feature extractor in eval mode; the dog/fish test loader -> 2 random 3x64x64 base
#   images of the new class and a random target image; attack_iters 1000 -> 150; the poison
#   tensors and the dataset saving at the end dropped; cpu, seeded.
import numpy as np
import torch
import torch.nn as nn


def forward_step(model: nn.Sequential, img: torch.Tensor, target_image: torch.Tensor,
                 lr: float) -> torch.Tensor:
    """helper function performing the forward step"""
    img = img.detach() # disconnect image from the current autograd graph
    img.requires_grad_()

    with torch.enable_grad():
        logits = model(img)
        target_logits = model(target_image)
        loss = torch.norm(logits - target_logits)

    gradient = torch.autograd.grad(loss, [img])[0]
    perturbed_img = img - lr*gradient
    return perturbed_img


def backward_step(img: torch.Tensor, base_img: torch.Tensor, lr: float, beta: float) -> torch.Tensor:
    """helper function to perform the backward step"""
    perturbed_img = (img + lr*beta*base_img) / (1 + beta*lr)
    perturbed_img = torch.clamp(perturbed_img, 0, 1) # to avoid clipping

    return perturbed_img


def create_perturbed_dataset(model, test_loader, target_image, new_class, attack_iters, num_poisons):
    img_shape = np.squeeze(target_image).shape
    beta = 0.25 * (2048 / float(img_shape[0] * img_shape[1] * img_shape[2]))**2
    print("beta = {}".format(beta))

    current_pertube_count = 0
    for idx, (input, target) in enumerate(test_loader):
        difference = 100 # difference between base and target in feature space, will be updated
        if target == new_class and current_pertube_count < num_poisons:
            base_image, target = input, target
            old_image = base_image

            # Initializations
            num_m = 40
            last_m_objs = []
            decay_coef = 0.5 #decay coeffiencet of learning rate
            stopping_tol = 1e-10 #for the relative change
            learning_rate = 500.0*255 #iniital learning rate for optimization
            rel_change_val = 1e5
            target_feat_rep = model(target_image).detach()
            old_feat_rep = model(base_image).detach() #also known as the old image
            old_obj = torch.linalg.norm(old_feat_rep - target_feat_rep) + \
                      beta*torch.linalg.norm(old_image - base_image)
            last_m_objs.append(old_obj)
            obj_threshold = 2.9

            for iteration in range(attack_iters):
                if iteration % 20 == 0:
                    the_diff_here = torch.linalg.norm(old_feat_rep - target_feat_rep) #get the diff
                    print("iter: %d | diff: %.3f | obj: %.3f" % (iteration, the_diff_here, old_obj))
                new_image = forward_step(model, old_image, target_image,
                                         learning_rate)
                new_image = backward_step(new_image, old_image, learning_rate, beta)

                # check stopping condition:  compute relative change in image between iterations
                rel_change_val = torch.linalg.norm(new_image-old_image)/torch.linalg.norm(new_image)
                if (rel_change_val < stopping_tol) or (old_obj <= obj_threshold):
                    print("! reached the object threshold -> stopping optimization !")
                    break

                # compute new objective value
                new_feat_rep = model(new_image).detach()
                new_obj = torch.linalg.norm(new_feat_rep - target_feat_rep) + \
                          beta*torch.linalg.norm(new_image - base_image)

                #find the mean of the last M iterations
                avg_of_last_m = sum(last_m_objs)/float(min(num_m, iteration+1))
                # If the objective went up, then learning rate is too big.
                # Chop it, and throw out the latest iteration
                if new_obj >= avg_of_last_m and (iteration % num_m/2 == 0):
                    learning_rate *= decay_coef
                    new_image = old_image
                else:
                    old_image = new_image
                    old_obj = new_obj
                    old_feat_rep = new_feat_rep

                if iteration < num_m-1:
                    last_m_objs.append(new_obj)
                else:
                    #first remove the oldest obj then append the new obj
                    del last_m_objs[0]
                    last_m_objs.append(new_obj)

                difference = torch.linalg.norm(old_feat_rep - target_feat_rep)

            print("difference:", float(difference))
            current_pertube_count += 1


torch.manual_seed(0)
np.random.seed(0)
model = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(),
                      nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 2048))
for m in model.modules():
    if isinstance(m, (nn.Conv2d, nn.Linear)):
        nn.init.normal_(m.weight, std=0.5)
model.eval()
target_image = 0.3 * torch.rand(1, 3, 64, 64)
test_loader = [(0.7 + 0.3 * torch.rand(1, 3, 64, 64), torch.tensor([1])) for _ in range(2)]
create_perturbed_dataset(model, test_loader, target_image, new_class=1, attack_iters=150, num_poisons=2)
