# Source: https://github.com/fffasttime/MRFI/pull/5
#   code: mrfi/mrfi.py before the pull request (MRFI.__init__, MRFI.__add_hooks,
#   __add_moduleconfig, _pre_hook_func/_after_hook_func)
# Adapted: the config tree (EasyConfig/ConfigTree, selectors, error modes, observers) reduced
#   to a per-module dict with one activation injector (random value replacement at a given
#   rate); LeNet-like CNN on random 1x28x28 images instead of the CIFAR/ImageNet models; a
#   fault-injection campaign of 40 trials as the pull request's description runs it, each
#   evaluating one batch of 32 images; cpu, seeded.
import torch
import torch.nn as nn
import torch.nn.functional as F


def FI_activations(config, act):
    if not config or not config.get('enabled', False):
        return
    if isinstance(act, tuple):
        act = act[0]
    mask = torch.rand_like(act) < config['rate']
    act[mask] = torch.randn(int(mask.sum())) * config['scale']


def _pre_hook_func(config_node, module, inputs):
    FI_activations(config_node['activation'], inputs)


def _after_hook_func(config_node, module, inputs, output):
    FI_activations(config_node['activation_out'], output)


class MRFI:
    """MRFI core object, a wrapper of network module."""
    def __init__(self, model: nn.Module, config: dict) -> None:
        self.model = model
        self.config = self.__expand_config(config)

        self.__add_hooks()
        self.golden = False
        self.global_FI_enabled = True # also affect quantization

    def __add_hooks(self):
        for _, module in self.model.named_modules():
            module.register_forward_pre_hook(lambda mod, input: _pre_hook_func(mod.FI_config, mod, input))
            module.register_forward_hook(lambda mod, input, output: _after_hook_func(mod.FI_config, mod, input, output))

    def __empty_configtree(self, module: torch.nn.Module):
        curdict = {
            'weights': {},
            'activation_out':{},
            'activation':{},
            'observers':{},
            'observers_pre':{},
            'sub_modules':{}
        }
        for name, submodule in module.named_children():
            curdict['sub_modules'][name] = self.__empty_configtree(submodule)
        return curdict

    def __add_moduleconfig(self, configtree, module):
        module.FI_config = configtree
        for name, submodule in module.named_children():
            if name in configtree['sub_modules']:
                self.__add_moduleconfig(configtree['sub_modules'][name],submodule)

    def __expand_config(self, config):
        configtree = self.__empty_configtree(self.model)
        for name in config.get('module_name', []):
            configtree['sub_modules'][name]['activation_out'] = {
                'enabled': True, 'rate': config['rate'], 'scale': config['scale']}
        self.__add_moduleconfig(configtree, self.model)
        return configtree

    def __call__(self, *args, **kwargs):
        return self.model(*args, **kwargs)


class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = x.flatten(1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def main():
    torch.manual_seed(0)
    model = LeNet().eval()
    images = torch.randn(32, 1, 28, 28)
    with torch.no_grad():
        golden = model(images).argmax(1)
    config = {'module_name': ['conv1', 'conv2', 'fc1'], 'rate': 1e-3, 'scale': 10.0}
    mismatches = []
    for trial in range(40):
        fi_model = MRFI(model, config)
        with torch.no_grad():
            pred = fi_model(images).argmax(1)
        mismatches.append((pred != golden).float().mean().item())
        if trial % 20 == 0:
            print('trial', trial, 'mismatch rate', sum(mismatches) / len(mismatches))
    print('campaign mismatch rate', sum(mismatches) / len(mismatches))


if __name__ == '__main__':
    main()
