"""What the linter knows about the PyTorch API and about naming conventions (no torch).

The tables are deliberately small and explicit: each entry is a fact about torch (a
factory, a method that returns a value without autograd history) or a naming convention
common enough in training code to count as evidence (``model``, ``criterion``,
``val_loader``). Rules never match names directly; they ask the data flow, which uses
these tables.
"""

from __future__ import annotations

import re

__all__ = [
    "FACTORIES", "NO_GRAPH_METHODS", "SCALAR_METHODS", "NO_GRAPH_FUNCTIONS", "SCALAR_ATTRS",
    "INPLACE_SAFE_ON_LEAF", "MODEL_NAME", "LOSS_NAME", "LOADER_NAME", "EVAL_LOADER_NAME",
    "EVAL_FUNCTION", "OPTIMIZER_NAME", "is_no_grad_decorator", "BACKWARD_CALLERS",
    "is_inplace_method", "TARGET_NAME", "STEP_FUNCTIONS",
    "NO_GRAD_CONTEXTS", "ENABLE_GRAD_CONTEXTS", "GRAPH_FREE_BUILTINS", "PASS_THROUGH_BUILTINS",
    "LIGHTNING_NO_GRAD_HOOKS", "last_name", "VERB_PREFIX", "is_model_name", "MOVE_METHODS",
    "TUPLE_RESULTS", "TENSOR_ONLY_METHODS", "is_constructor_name", "MODEL_STEP_METHODS",
]

#: torch functions that create a new tensor; ``requires_grad=True`` makes it a leaf
FACTORIES = frozenset({
    "zeros", "ones", "empty", "full", "rand", "randn", "randint", "randperm", "arange",
    "range", "linspace", "logspace", "eye", "tensor", "as_tensor", "from_numpy",
    "zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like",
    "randint_like", "empty_strided", "frombuffer", "asarray", "normal", "bernoulli",
    "multinomial", "poisson", "tril_indices", "triu_indices", "cartesian_prod",
})

#: tensor methods whose result is a tensor without autograd history
NO_GRAPH_METHODS = frozenset({
    "detach", "argmax", "argmin", "argsort", "long", "int", "bool", "short", "byte", "char",
    "eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf", "isfinite", "isneginf", "isposinf",
    "nonzero", "logical_and", "logical_or", "logical_not", "logical_xor", "count_nonzero",
    "bincount", "isclose", "signbit", "new_zeros", "new_ones", "new_empty", "new_full",
    "new_tensor",
})

#: methods that move or cast a value and return the same kind of object (a batch object's
#: ``.to(device)`` is still a batch object; a tensor's is a tensor)
MOVE_METHODS = frozenset({
    "to", "cuda", "cpu", "float", "half", "double", "bfloat16", "contiguous", "pin_memory",
    "xpu", "mps", "npu", "to_device", "long", "int",
})

#: torch functions and tensor methods that return a tuple (or named tuple) of tensors
TUPLE_RESULTS = frozenset({
    "max", "min", "sort", "topk", "kthvalue", "median", "nanmedian", "mode", "split", "chunk",
    "unbind", "tensor_split", "hsplit", "vsplit", "dsplit", "svd", "qr", "eig", "eigh",
    "slogdet", "lu", "std_mean", "var_mean", "aminmax", "frexp", "meshgrid", "broadcast_tensors",
    "histogram", "unique", "unique_consecutive", "cummax", "cummin", "grad", "lstsq",
})

#: methods only a tensor has: a name they are called on is a ``torch.Tensor``
TENSOR_ONLY_METHODS = frozenset({
    "backward", "item", "detach", "detach_", "retain_grad", "register_hook", "requires_grad_",
})

#: tensor methods (and a few common calls) that return plain Python values
SCALAR_METHODS = frozenset({
    "item", "tolist", "numpy", "size", "dim", "ndimension", "numel", "nelement",
    "element_size", "stride", "data_ptr", "is_contiguous", "storage_offset", "equal",
    "allclose", "any", "all", "get_device", "is_floating_point", "is_complex", "backward",
    "register_hook", "retain_grad", "untyped_storage", "storage", "type", "__len__",
    "is_pinned", "is_shared", "tobytes", "item_size", "has_names", "is_set_to",
})

#: torch functions whose result has no autograd history
NO_GRAPH_FUNCTIONS = frozenset({
    "argmax", "argmin", "argsort", "eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf",
    "isfinite", "nonzero", "logical_and", "logical_or", "logical_not", "count_nonzero",
    "bincount", "isclose", "equal", "allclose", "is_tensor", "numel", "where_nonzero",
    "bucketize", "searchsorted", "unique", "unique_consecutive", "histc",
})

#: attributes of a tensor that are not tensors with history
SCALAR_ATTRS = frozenset({
    "shape", "dtype", "device", "requires_grad", "is_leaf", "ndim", "grad_fn", "names",
    "layout", "is_cuda", "is_sparse", "is_quantized", "is_meta", "nbytes", "itemsize",
    "_version", "output_nr",
})

#: in-place-looking methods that are allowed on a leaf that requires grad
INPLACE_SAFE_ON_LEAF = frozenset({
    "requires_grad_", "share_memory_", "detach_", "retain_grad", "record_stream",
    "register_hook", "pin_memory", "set_", "apply_", "map_", "resize_", "cuda_", "type_",
})

#: builtins whose result never carries a graph
GRAPH_FREE_BUILTINS = frozenset({
    "float", "int", "bool", "len", "str", "repr", "print", "isinstance", "hasattr",
    "getattr", "id", "hash", "format", "type", "round", "range", "callable", "issubclass",
})

#: builtins whose result carries whatever their arguments carry
PASS_THROUGH_BUILTINS = frozenset({
    "sum", "max", "min", "abs", "list", "tuple", "sorted", "reversed", "iter", "next",
    "dict", "set", "pow", "divmod",
})

#: context managers that disable autograd recording for their body
NO_GRAD_CONTEXTS = frozenset({
    "torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad",
    "torch.autograd.grad_mode.no_grad", "torch.autograd.grad_mode.inference_mode",
})


def is_no_grad_decorator(name: str | None) -> bool:
    """A decorator that runs the function without autograd recording: torch's own, or a
    project's wrapper named so (``@smart_inference_mode()``, ``@utils.no_grad()``)."""
    if not name:
        return False
    tail = name.rpartition(".")[2]
    return name in NO_GRAD_CONTEXTS or tail.endswith(("inference_mode", "no_grad"))


ENABLE_GRAD_CONTEXTS = frozenset({"torch.enable_grad", "torch.autograd.enable_grad"})

#: Lightning runs these hooks under ``torch.no_grad()`` / ``inference_mode()`` itself
LIGHTNING_NO_GRAD_HOOKS = frozenset({
    "validation_step", "test_step", "predict_step", "on_validation_batch_end",
    "on_test_batch_end", "on_predict_batch_end", "validation_epoch_end", "test_epoch_end",
})

#: the step methods of Lightning's ``LightningModule`` API, which run the module's own forward
#: pass (the default ``predict_step`` calls ``self(batch)``): called directly on a model
#: (``model.predict_step(batch)``), outside the trainer, they record a graph like
#: ``model(batch)``. (``generate`` is not one: Hugging Face runs it under ``no_grad``.)
MODEL_STEP_METHODS = frozenset({"training_step", "validation_step", "test_step", "predict_step"})

#: receivers whose ``.backward(loss)`` takes the loss as its first argument
BACKWARD_CALLERS = frozenset({
    "accelerator", "fabric", "engine", "model_engine", "amp", "trainer", "strategy",
    "precision_plugin", "scaler",
})

#: names that denote an ``nn.Module`` by convention (the last dotted component)
MODEL_NAME = re.compile(
    r"^(model|net|network|netg|netd|backbone|classifier|generator|discriminator|encoder|"
    r"decoder|autoencoder|vae|unet|transformer|gpt|bert|resnet|cnn|rnn|lstm|gru|mlp|"
    r"teacher|student|[a-z0-9_]*_(model|net|network|encoder|decoder|rnn|lstm|gru))$")
#: a verb prefix makes a ``*_model`` name a function that builds or handles a model
#: (``load_model()``, ``get_net()``), not a model whose call runs a forward pass
VERB_PREFIX = re.compile(
    r"^_*(get|load|build|create|make|download|init|initialize|setup|prepare|convert|save|export|"
    r"wrap|unwrap|copy|clone|compile|instantiate|construct|new|from|to|set|register|freeze|"
    r"unfreeze|print|log|count|check|is|has|reset|update|apply|train|eval|evaluate|test|run|"
    r"fit|patch|replace|move|cast|quantize|shard|offload|push|upload|fetch|read|write|dump|"
    r"summarize|describe|validate|verify|profile|benchmark|trace|script|deploy|serve)_",
    re.IGNORECASE)


def is_model_name(name: str) -> bool:
    """Whether a name (the last component of a key) denotes an ``nn.Module`` by convention.

    A capitalised name is a class (``lib.Model``, ``keras.Model``): calling it constructs an
    object of unknown type, it does not run a forward pass.
    """
    known = _MODEL_NAMES.get(name)
    if known is None:  # asked about the same few names again and again: remembered
        if len(_MODEL_NAMES) >= _MODEL_NAMES_MAX:
            _MODEL_NAMES.clear()
        low = name.lower()
        known = _MODEL_NAMES[name] = not is_constructor_name(name) and bool(
            MODEL_NAME.match(low)) and not VERB_PREFIX.match(low)
    return known


#: name -> :func:`is_model_name` (bounded: cleared when full)
_MODEL_NAMES: dict[str, bool] = {}
_MODEL_NAMES_MAX = 50_000


def is_constructor_name(name: str) -> bool:
    """Whether a callee name is a class by convention (``Model``, ``ResNet``, not ``model``)."""
    return name[:1].isupper() and not name.isupper()


#: names that denote a loss function or criterion
#: names of targets (labels) by convention: they never require grad
TARGET_NAME = re.compile(r"^(y|y_?true|y_?gt|gts?|targets?|labels?|ground_truths?|"
                         r"[a-z0-9_]*_(targets?|labels?))$", re.IGNORECASE)
LOSS_NAME = re.compile(r"(loss|criterion|criteria|objective)", re.IGNORECASE)
#: names that denote an optimizer
OPTIMIZER_NAME = re.compile(r"^(?:(?i:opt|optim|optimizer|optimiser|[a-z0-9_]*_(?:opt|optim|optimizer))"
                            r"|(?:opt|optim|optimizer|optimiser)"  # optimizer_D, optD, opt2
                            r"(?:_[A-Za-z0-9_]+|[A-Z][A-Za-z0-9]*|\d+))$")
#: an iterable of batches
LOADER_NAME = re.compile(r"(loader|batches|_dl$|^dl$|_iter$|^data_iter)", re.IGNORECASE)
#: an iterable of evaluation batches
EVAL_LOADER_NAME = re.compile(r"(val|valid|validation|eval|test|dev)[a-z_]*(loader|_dl$|batches)|"
                              r"^(val|valid|eval|test)_?(data|set|dataset)$", re.IGNORECASE)
#: function names that denote evaluation / inference code
EVAL_FUNCTION = re.compile(
    r"^_*(evaluate|evaluation|eval|validate|validation|valid|val|predict|prediction|infer|"
    r"inference|run_eval|run_validation|test_epoch|test_model|evaluate_model|generate)(_|$)",
    re.IGNORECASE)


def is_inplace_method(name: str) -> bool:
    """Whether a tensor method name is an in-place operation (``add_``, ``zero_``)."""
    return (name.endswith("_") and not name.startswith("_") and name not in INPLACE_SAFE_ON_LEAF)


def last_name(key: str) -> str:
    """The last component of a dotted key: ``"self.model"`` -> ``"model"``."""
    return key.rpartition(".")[2]

#: methods a framework (or a runner) calls once per training step (their ``self.*``
#: containers persist)
STEP_FUNCTIONS = frozenset({"training_step", "train_step", "training_step_end"})
