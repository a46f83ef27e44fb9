"""Static and dynamic hints the doctor names lines by: which registration filled a hook
dict (hook_sites), numpy arrays' shared memory, writes into a tensor from a view of itself."""

from __future__ import annotations

import doctest
import functools

import numpy as np
import torch

from torchmem.doctor import hook_sites, internals
from torchmem.doctor.hook_sites import hook_methods, hook_names, matching_registrations
from torchmem.doctor.internals import NOT_ARRAY, array_base
from torchmem.doctor.source import Statement


def _registration(line: int, method: str, value: str) -> Statement:
    return Statement(file="train.py", line=line, code=f"layer.{method}({value})", kind="hook",
                     function="__init__", in_loop=True, value=value, target="layer",
                     method=method)


class _Recorder:
    def save(self, module, grad_input, grad_output):
        pass


def test_the_functions_a_hook_dict_holds_by_name():
    rec = _Recorder()
    layer = torch.nn.ReLU()
    layer.register_forward_hook(rec.save)
    layer.register_forward_hook(functools.partial(_Recorder.save, rec))
    layer.register_forward_hook(lambda *a: None)  # no name to match: left out

    class Loud:  # a callable object: its attributes are the script's code, never read
        def __call__(self, *args):
            return None

        def __getattr__(self, name):
            raise RuntimeError(f"read {name}")

    layer.register_forward_hook(Loud())
    assert hook_names(layer._forward_hooks) == ("save",)
    assert hook_names(object()) == ()


def test_which_method_filled_the_backward_hooks():
    full, legacy = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    full.register_full_backward_hook(lambda *a: None)
    legacy.register_backward_hook(lambda *a: None)
    assert hook_methods(full, "_backward_hooks") == ("register_full_backward_hook",)
    assert hook_methods(legacy, "_backward_hooks") == ("register_backward_hook",)
    assert hook_methods(full, "_forward_hooks") == ("register_forward_hook",)


def test_only_registrations_that_can_have_filled_the_dict_are_kept():
    found = [_registration(10, "register_full_backward_hook", "self.save_grad"),
             _registration(12, "register_backward_hook", "self.save_grad"),
             _registration(27, "register_full_backward_hook", "count_calls"),
             _registration(30, "register_full_backward_hook", "fn"),
             _registration(31, "register_full_backward_hook", "partial(save_grad, k)")]
    defined = frozenset({"save_grad", "count_calls"})
    kept = matching_registrations(found, ("save_grad",), ("register_full_backward_hook",), defined)
    # another method (12) and another function of the script (27) are out; a variable
    # (`fn`, which may be bound to save_grad) and a partial of save_grad stay
    assert [s.line for s in kept] == [10, 30, 31]
    assert [s.line for s in matching_registrations(found, (), (), defined)] == [10, 12, 27, 30, 31]


def test_array_base_follows_the_memory_a_numpy_array_shares():
    t = torch.arange(4.0)
    shared = t.numpy()
    base = array_base(shared)  # a tensor on the same storage (not always `t` itself)
    assert isinstance(base, torch.Tensor)
    assert base.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()
    assert array_base(shared[1:]) is shared
    assert array_base(np.zeros(3)) is None  # owns its memory
    assert array_base([1, 2]) is NOT_ARRAY and array_base(t) is NOT_ARRAY


def test_the_examples_of_the_docstrings():
    from torchmem.doctor import self_view_writes

    for module in (hook_sites, internals, self_view_writes):
        assert doctest.testmod(module).failed == 0


def test_writes_from_a_view_of_the_same_tensor_outside_no_grad(tmp_path):
    from torchmem.doctor.self_view_writes import self_view_writes

    script = tmp_path / "post.py"
    script.write_text(
        "import torch\n"
        "def nms(x, y):\n"
        "    x[:, 5:] *= x[:, 4:5]\n"           # 3: a write from a view of itself
        "    y[:, 0] = x[:, 0] - x[:, 2] / 2\n"  # 4: into another tensor
        "    y[1:].mul_(y[:1])\n"                 # 5: an in-place method, the same tensor
        "    with torch.no_grad():\n"
        "        x[0] = x[1]\n"                   # 7: nothing recorded
        "@torch.no_grad()\n"
        "def update(t):\n"
        "    t[0] += t[1]\n"                      # 10: nothing recorded
        "store = {}\n"
        "store['a'] = store\n",                   # 12: a dict, read by name: still listed
        encoding="utf-8")
    found = [(s.line, s.target, s.function) for s in self_view_writes([str(script)])]
    assert found == [(3, "x", "nms"), (5, "y", "nms"), (12, "store", "<module>")]


def test_the_statement_that_put_a_kept_key_into_a_handed_over_dict(tmp_path):
    from torchmem.doctor.key_origin import key_origin
    from torchmem.doctor.source import Statement

    script = tmp_path / "train.py"
    script.write_text(
        "def metrics(out, prefix=''):\n"
        "    m = {}\n"
        "    m[f'{prefix}loss'] = out.mean()\n"      # 3: the kept key, written as an f-string
        "    m[f'{prefix}acc'] = out.detach()\n"     # 4
        "    return m\n"
        "def step(out, keep):\n"
        "    logs = metrics(out)\n"                 # 7
        "    keep(logs)\n"                          # 8: the call that hands `logs` over
        "    extra = {'loss': out, 'n': 1}\n"       # 9: a literal in the caller
        "    keep(extra)\n", encoding="utf-8")      # 10
    site = Statement(file=str(script), line=8, code="keep(logs)", kind="call",
                     function="step", in_loop=False, value="logs")
    found = key_origin(site, "store['train']['loss']", [str(script)])
    assert (found.line, found.value, found.target) == (3, "out.mean()", "m")
    literal = Statement(file=str(script), line=10, code="keep(extra)", kind="call",
                        function="step", in_loop=False, value="extra")
    assert key_origin(literal, "store['loss']", [str(script)]).line == 9
    # no constant key, or a key no statement writes: nothing
    assert key_origin(site, "store[3]", [str(script)]) is None
    assert key_origin(site, "store['other']", [str(script)]) is None
