# Source: https://github.com/NeuroBench/neurobench/issues/184
#   code: neurobench/benchmarks/{benchmark,hooks,workload_metrics}.py,
#   neurobench/models/{model,torch_model}.py, neurobench/utils.py and
#   neurobench/examples/mswc_fscil/{mswc_fscil,M5}.py at commit a300799 (the parent of the
#   fix de4ad19)
# Adapted: Benchmark.run, ActivationHook, LayerHook, NeuroBenchModel, TorchModel,
#   detect_activations_connections, classification_accuracy, M5, test and pre_train kept
#   (only the methods the example calls); snntorch (not installed) replaced by a stub
#   SpikingNeuron class for the isinstance check; tqdm dropped; the MSWC data set replaced by
#   random 20x201 MFCC-shaped features with labels among 100 base classes (128 training
#   samples, 32 test samples) and the MFCC pre-processor by a pass-through with the same
#   (data, target) interface; the example's non-spiking M5 with n_channel=64 instead of 256,
#   BATCH_SIZE 32, EPOCHS 8 instead of 50; cpu, seeded.
import sys
from contextlib import redirect_stdout

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class snn:
    class SpikingNeuron(nn.Module):
        pass


def activation_modules():
    """
    The activation layers that can be auto-deteced. Every activation layer can only be included once.
    """
    return list(set([nn.ReLU,
                     nn.Sigmoid,
                     ]))


def check_shape(preds, labels):
    """ Checks that the shape of the predictions and labels are the same.
    """
    if preds.shape != labels.shape:
        raise ValueError("preds and labels must have the same shape")


class ActivationHook():
    """ Hook class for an activation layer in a NeuroBenchModel.

    Output of the activation layer in each forward pass will be stored.
    """

    def __init__(self, layer, connection_layer=None, prev_act_layer_hook=None):
        """ Initializes the class.

        A forward hook is registered for the activation layer.

        Args:
            layer: The activation layer which is a PyTorch nn.Module.
        """
        self.activation_outputs = []
        self.activation_inputs = []
        if layer is not None:
            self.hook = layer.register_forward_hook(self.hook_fn)
            self.hook_pre = layer.register_forward_pre_hook(self.pre_hook_fn)
        else:
            self.hook = None
            self.hook_pre = None

        self.layer = layer # the activation layer

        # Check if the layer is a spiking layer (SpikingNeuron is the superclass of all snnTorch spiking layers)
        self.spiking = isinstance(layer, snn.SpikingNeuron)

    def pre_hook_fn(self, layer, input):
        """Hook function that will be called before each forward pass of
        the activation layer.

        Each input of the activation layer will be stored.

        Args:
            layer: The registered layer
            input: Input of the registered layer
        """
        self.activation_inputs.append(input)

    def hook_fn(self, layer, input, output):
        """Hook function that will be called after each forward pass of
        the activation layer.

        Each output of the activation layer will be stored.

        Args:
            layer: The registered layer
            input: Input of the registered layer
            output: Output of the registered layer
        """
        if self.spiking:
            self.activation_outputs.append(output[0])


        else:
            self.activation_outputs.append(output)
    def empty_hook(self):
        """Deletes the contents of the hooks, but keeps the hook registered.
        """
        self.activation_outputs = []
        self.activation_inputs = []

    def reset(self):
        """ Resets the stored activation outputs and inputs
        """
        self.activation_outputs = []
        self.activation_inputs = []

    def close(self):
        """ Remove the registered hook.
        """
        if self.hook:
            self.hook.remove()
        if self.hook_pre:
            self.hook_pre.remove()

class LayerHook():
    def __init__(self, layer) -> None:
        self.layer = layer
        self.inputs = []
        if layer is not None:
            self.hook = layer.register_forward_pre_hook(self.hook_fn)
        else:
            self.hook = None

    def hook_fn(self, module, input):
        self.inputs.append(input)

    def register_hook(self):
        self.hook = self.layer.register_forward_pre_hook(self.hook_fn)

    def reset(self):
        self.inputs = []

    def close(self):
        if self.hook:
            self.hook.remove()


class AccumulatedMetric:
    """ Abstract class for a metric which must save state between batches.
    """

    def __init__(self):
        """ Initialize metric.
        """
        raise NotImplementedError("Subclasses of AccumulatedMetric should implement __init__")

    def __call__(self, model, preds, data):
        """ Process this batch of data.

        Args:
            model: A NeuroBenchModel.
            preds: A torch tensor of model predictions.
            data: A tuple of data and labels.
        Returns:
            result: the accumulated metric as of this batch.
        """
        raise NotImplementedError("Subclasses of AccumulatedMetric should implement __call__")

    def compute(self):
        """ Compute the metric score using all accumulated data.

        Returns:
            result: the final accumulated metric.
        """
        raise NotImplementedError("Subclasses of AccumulatedMetric should implement compute")

    def reset(self):
        """ Reset the metric state.

        This is called when the benchmark is run again, e.g. on the FSCIL task the benchmark
            is run at the end of each session.
        """
        raise NotImplementedError("Subclasses of AccumulatedMetric should implement reset")


def detect_activations_connections(model):
    """Register hooks or other operations that should be called before running a benchmark.
    """
    for hook in model.activation_hooks:
        hook.reset()
        hook.close()
    for hook in model.connection_hooks:
        hook.reset()
        hook.close()
    model.activation_hooks = []
    model.connection_hooks = []

    supported_layers = model.supported_layers

    # recurrent_supported_layers = (torch.nn.RNNBase)
    # recurr_cell_supported_layers = (torch.nn.RNNCellBase)

    act_layers = model.activation_layers()
    # Registered activation hooks
    for layer in act_layers:
        model.activation_hooks.append(ActivationHook(layer))

    con_layers = model.connection_layers()
    for flat_layer in con_layers:
        if isinstance(flat_layer, supported_layers):
            model.connection_hooks.append(LayerHook(flat_layer))



def classification_accuracy(model, preds, data):
    """ Classification accuracy of the model predictions.

    Args:
        model: A NeuroBenchModel.
        preds: A tensor of model predictions.
        data: A tuple of data and labels.
    Returns:
        float: Classification accuracy.
    """
    check_shape(preds, data[1])
    equal = torch.eq(preds, data[1])
    return torch.mean(equal.float()).item()


class workload_metrics:
    AccumulatedMetric = AccumulatedMetric
    detect_activations_connections = staticmethod(detect_activations_connections)
    classification_accuracy = staticmethod(classification_accuracy)


static_metrics = None


class NeuroBenchModel:
    """ Abstract class for NeuroBench models. Individual model frameworks are
    responsible for defining model inference.
    """

    def __init__(self, net):
        """ Init using a trained network

        Args:
            net: A trained network
        """
        self.activation_modules = activation_modules()
        self.activation_hooks = []
        self.connection_hooks = []
        self.first_layer = None

        self.supported_layers = (torch.nn.Linear, torch.nn.Conv2d, torch.nn.Conv1d,
                        torch.nn.Conv3d, torch.nn.RNNBase, torch.nn.RNNCellBase,)


    def __call__(self, batch):
        """ Includes the whole pipeline from data to inference (output should be same format as targets).

        Args:
            batch: A batch of data to run inference on
        """
        raise NotImplementedError("Subclasses of NeuroBenchModel should implement __call__")

    def __net__(self):
        """ Returns the underlying network
        """
        raise NotImplementedError("Subclasses of NeuroBenchModel should implement __net__")

    def set_first_layer(self, layer):
        """ Sets the first layer of the network
        """
        self.first_layer = layer

    def add_activation_module(self, activaton_module):
        """ Add a cutomized activaton_module that can be detected after running the preprocessing pipeline for detecting activation functions
        """
        self.activation_modules.append(activaton_module)

    def activation_layers(self):
        """ Retrieve all the activaton layers of the underlying network (including spiking neuron layers)
        """
        def check_if_activation(module):
            for activation_module in self.activation_modules:
                if isinstance(module, activation_module):
                    return True

        def get_activation_layers(parent):
            """ Returns all the neuro layers
            """
            layers = []
            children = parent.children()
            for child in children:
                if check_if_activation(child):
                    # is an activation module
                    layers.append(child)
                else:
                    if len(list(child.children())) != 0:
                        # not an activation module and has nested submodules
                        children_layers = get_activation_layers(child)
                        layers.extend(children_layers)

            return layers


        root = self.__net__()
        layers = get_activation_layers(root)
        return layers

    def connection_layers(self):
        """ Retrieve all the connection layers of the underlying network (torch.nn.Linear, torch.nn.Conv2d, torch.nn.Conv1d, torch.nn.Conv3d)
        """
        supported_layers = self.supported_layers

        def get_connection_layers(parent):
            """ Returns all the connection layers
            """
            connection_layers = []
            children = parent.children()
            for child in children:
                grand_children = list(child.children())
                if len(grand_children) == 0:  # leaf child
                    if isinstance(child, supported_layers):
                            connection_layers.append(child)

                else:
                    children_layers = get_connection_layers(child)
                    connection_layers.extend(children_layers)

            return connection_layers

        root = self.__net__()
        connection_layers = get_connection_layers(root)
        return connection_layers

    def reset_hooks(self):
        """ Resets all the hooks (activation hooks and connection hooks)
        """
        for hook in self.activation_hooks:
            hook.reset()

        for hook in self.connection_hooks:
            hook.reset()


class TorchModel(NeuroBenchModel):
    """ The TorchModel class wraps an nn.Module.
    """
    def __init__(self, net):
        """ Initializes the TorchModel class.

        Args:
            net: A PyTorch nn.Module.
        """
        super().__init__(net)

        self.net = net
        self.net.eval()

    def __call__(self, batch):
        """ Wraps forward pass of torch.nn model.

        Args:
            batch: A PyTorch tensor of shape (batch, timesteps, features*)

        Returns:
            preds: either a tensor to be compared with targets or passed to
                NeuroBenchPostProcessors.
        """
        return self.net(batch)

    def __net__(self):
        """ Returns the underlying network.
        """
        return self.net

class Benchmark():
    """ Top-level benchmark class for running benchmarks.
    """
    def __init__(self, model, dataloader, preprocessors, postprocessors, metric_list):
        """
        Args:
            model: A NeuroBenchModel.
            dataloader: A PyTorch DataLoader.
            preprocessors: A list of NeuroBenchPreProcessors.
            postprocessors: A list of NeuroBenchPostProcessors.
            metric_list: A list of lists of strings of metrics to run.
                First item is static metrics, second item is data metrics.
        """

        self.model = model
        self.dataloader = dataloader # dataloader not dataset
        self.preprocessors = preprocessors
        self.postprocessors = postprocessors

        self.static_metrics = {m: getattr(static_metrics, m) for m in metric_list[0]}
        self.workload_metrics = {m: getattr(workload_metrics, m) for m in metric_list[1]}

    def run(self, quiet=False, verbose: bool = False,
            dataloader=None, preprocessors=None, postprocessors=None):
        """ Runs batched evaluation of the benchmark.

        Args:
            dataloader (optional): override DataLoader for this run.
            preprocessors (optional): override preprocessors for this run.
            postprocessors (optional): override postprocessors for this run.
            quiet (bool, default=False): If True, output is suppressed.
            verbose (bool, default=False): If True, metrics for each bach will be printed.
                                           If False (default), metrics are accumulated and printed after all batches are processed.

        Returns:
            results: A dictionary of results.
        """
        with redirect_stdout(None if quiet else sys.stdout):
            print("Running benchmark")

            # Static metrics
            results = {}
            for m in self.static_metrics.keys():
                results[m] = self.static_metrics[m](self.model)

            # add hooks to the model
            workload_metrics.detect_activations_connections(self.model)

            dataloader = dataloader if dataloader is not None else self.dataloader
            preprocessors = preprocessors if preprocessors is not None else self.preprocessors
            postprocessors = postprocessors if postprocessors is not None else self.postprocessors

            # Init/re-init stateful data metrics
            for m in self.workload_metrics.keys():
                if isinstance(self.workload_metrics[m],type) and issubclass(self.workload_metrics[m], workload_metrics.AccumulatedMetric):
                    self.workload_metrics[m] = self.workload_metrics[m]()
                elif isinstance(self.workload_metrics[m], workload_metrics.AccumulatedMetric): # new benchmark run, reset metric state
                    self.workload_metrics[m].reset()

            dataset_len = len(dataloader.dataset)

            batch_num = 0
            for data in dataloader:
                batch_size = data[0].size(0)

                # convert data to tuple
                if type(data) is not tuple:
                    data = tuple(data)

                # Preprocessing data
                for alg in preprocessors:
                    data = alg(data)

                # Run model on test data
                preds = self.model(data[0])

                for alg in postprocessors:
                    preds = alg(preds)

                # Data metrics
                batch_results = {}
                for m in self.workload_metrics.keys():
                    batch_results[m] = self.workload_metrics[m](self.model, preds, data)

                for m, v in batch_results.items():
                    # AccumulatedMetrics are computed after all batches complete
                    if isinstance(self.workload_metrics[m], workload_metrics.AccumulatedMetric):
                        continue
                    # otherwise accumulate via mean
                    else:
                        assert isinstance(v, float) or isinstance(v, int), "Data metric must return float or int to be accumulated"
                        if m not in results:
                            results[m] = v * batch_size / dataset_len
                        else:
                            results[m] += v * batch_size / dataset_len

                # delete hook contents
                self.model.reset_hooks()

                if verbose:
                    for m in self.workload_metrics.keys():
                        if isinstance(self.workload_metrics[m], workload_metrics.AccumulatedMetric):
                            results[m] = self.workload_metrics[m].compute()
                    print(f'\nBatch num {batch_num + 1}/{len(dataloader)}')
                    print(results)

                batch_num += 1

            # compute AccumulatedMetrics after all batches if they are not calculated at every iteration
            if not verbose:
                for m in self.workload_metrics.keys():
                    if isinstance(self.workload_metrics[m], workload_metrics.AccumulatedMetric):
                        results[m] = self.workload_metrics[m].compute()

        return results


class M5(nn.Module):
    def __init__(self, n_input=1, n_output=35, stride=16,
                 n_channel=32, input_kernel=80, pool_kernel=4, drop=False):
        """Modified from: https://pytorch.org/tutorials/intermediate/speech_command_classification_with_torchaudio_tutorial.html"""
        super().__init__()

        self.conv1 = nn.Conv1d(n_input, n_channel, kernel_size=input_kernel, stride=stride)
        self.bn1 = nn.BatchNorm1d(n_channel)
        self.act1 = nn.ReLU()
        self.drop1 = nn.Dropout(p=0.2) if drop else nn.Identity()
        self.pool1 = nn.MaxPool1d(pool_kernel)
        self.conv2 = nn.Conv1d(n_channel, n_channel, kernel_size=3)
        self.bn2 = nn.BatchNorm1d(n_channel)
        self.act2 = nn.ReLU()
        self.drop2 = nn.Dropout(p=0.2) if drop else nn.Identity()
        self.pool2 = nn.MaxPool1d(pool_kernel)
        self.conv3 = nn.Conv1d(n_channel, 2 * n_channel, kernel_size=3)
        self.bn3 = nn.BatchNorm1d(2 * n_channel)
        self.act3 = nn.ReLU()
        self.drop3 = nn.Dropout(p=0.2) if drop else nn.Identity()
        self.pool3 = nn.MaxPool1d(pool_kernel)
        self.conv4 = nn.Conv1d(2 * n_channel, 2 * n_channel, kernel_size=3)
        self.bn4 = nn.BatchNorm1d(2 * n_channel)
        self.act4 = nn.ReLU()
        self.drop4 = nn.Dropout(p=0.2) if drop else nn.Identity()
        self.pool4 = nn.MaxPool1d(pool_kernel)
        self.output = nn.Linear(2 * n_channel, n_output, bias=True)


    def forward(self, x, features_out=False):
        x = self.conv1(x)
        x = self.act1(self.bn1(x))
        x = self.drop1(x)
        x = self.pool1(x)
        x = self.conv2(x)
        x = self.act2(self.bn2(x))
        x = self.drop2(x)
        x = self.pool2(x)
        x = self.conv3(x)
        x = self.act3(self.bn3(x))
        x = self.drop3(x)
        x = self.pool3(x)
        x = self.conv4(x)
        x = self.act4(self.bn4(x))
        x = self.drop4(x)
        x = self.pool4(x)
        x = F.avg_pool1d(x, x.shape[-1])
        x = x.permute(0, 2, 1).squeeze()

        if not features_out:
            x = self.output(x)

        return x


squeeze = lambda x: (x[0].squeeze(), x[1])
out2pred = lambda x: torch.argmax(x, dim=-1)
to_device = lambda x: (x[0].to(device), x[1].to(device))

device = torch.device("cpu")
NUM_WORKERS = 0
BATCH_SIZE = 32
PIN_MEMORY = False
SPIKING = False
EPOCHS = 8


def encode(batch):
    data, target = batch
    return data, target


def MSWC(subset, procedure):
    n = 128 if procedure == "training" else 32
    generator = torch.Generator().manual_seed(1 if procedure == "training" else 2)
    features = torch.randn(n, 1, 20, 201, generator=generator)
    labels = torch.randint(0, 100, (n,), generator=generator)
    return TensorDataset(features, labels)


def test(test_model, mask, set=None):
    test_model.eval()

    if set is not None:
        test_loader = DataLoader(set, batch_size=BATCH_SIZE, num_workers=NUM_WORKERS, pin_memory=PIN_MEMORY)
    else:
        base_test_set = MSWC(subset="base", procedure="testing")
        test_loader = DataLoader(base_test_set, batch_size=BATCH_SIZE, num_workers=NUM_WORKERS, pin_memory=PIN_MEMORY)

    out_mask = lambda x: x - mask

    benchmark = Benchmark(TorchModel(test_model), metric_list=[[],["classification_accuracy"]], dataloader=test_loader,
                          preprocessors=[to_device, encode, squeeze], postprocessors=[out_mask, out2pred, torch.squeeze])

    pre_train_results = benchmark.run()
    test_accuracy = pre_train_results['classification_accuracy']

    return test_accuracy


def pre_train(model):
    base_train_set = MSWC(subset="base", procedure="training")
    pre_train_loader = DataLoader(base_train_set, batch_size=BATCH_SIZE, num_workers=NUM_WORKERS, shuffle=True, pin_memory=PIN_MEMORY)

    mask = torch.full((200,), float('inf')).to(device)
    mask[torch.arange(0,100, dtype=int)] = 0

    if SPIKING:
        lr = 0.001
    else:
        lr = 0.01

    optimizer = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=0.0001)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=20, gamma=0.1)

    for epoch in range(EPOCHS):
        print(f"Epoch: {epoch+1}")

        model.train()

        for _, (data, target) in enumerate(pre_train_loader):
            data = data.to(device)
            target = target.to(device)

            # apply transform and model on whole batch directly on device
            data, target = encode((data,target))
            output = model(data.squeeze())

            loss = F.cross_entropy(output.squeeze(), target)

            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

        if epoch % 5 == 0:
            train_acc = test(model, mask, set=base_train_set)
            test_acc = test(model, mask)

            print(f"The train accuracy is {train_acc*100}%")
            print(f"The test accuracy is {test_acc*100}%")

        scheduler.step()

    del base_train_set
    del pre_train_loader


torch.manual_seed(0)
model = M5(n_input=20, stride=2, n_channel=64,
        n_output=200, input_kernel=4, pool_kernel=2, drop=True).to(device)

pre_train(model)
