# Source: https://github.com/pytorch/pytorch/pull/149354
#   code: _get_fqns (the plain-module branch) and the key loop of _get_model_state_dict from
#   torch/distributed/checkpoint/state_dict.py as the pull request found them: _get_fqns is
#   decorated with @functools.cache, whose cache keys hold the model (the pull request:
#   "@functools.cache would keep 'self' alive ... if the model is deleted, the model's memory is
#   still occupied", pytorch#149100)
# Adapted: the DDP/FSDP/compiled-module branches, _StateDictInfo and the cpu/full-state-dict
#   options dropped (get_model_state_dict takes the model only); the stored report does not
#   include the user's loop, so it is completed as the scenario it describes: 10 models trained
#   one after another for 5 steps each, their state dicts saved to an in-memory buffer, then
#   deleted; random data; cpu, seeded.
import functools
import io

import torch
import torch.nn as nn

_CHECKPOINT_PREFIX = "_checkpoint_wrapped_module."


@functools.cache
def _get_fqns(model, name, dsd_fqn_modifiers="_fqn_modifiers", skip_ddp_prefix=True,
              skip_compiler_prefix=True):
    # Remove the checkpoint prefix, if it exists.
    name = name.replace(_CHECKPOINT_PREFIX, "")
    if "." not in name:
        return {name}

    obj_names = name.split(".")
    fqn_obj_names = []
    curr_obj = model
    for i, curr_obj_name in enumerate(obj_names):
        if hasattr(curr_obj, dsd_fqn_modifiers):
            if removed_fqn := getattr(curr_obj, dsd_fqn_modifiers)().get(curr_obj_name):
                if hasattr(curr_obj, removed_fqn):
                    curr_obj = getattr(curr_obj, removed_fqn)
        fqn_obj_names.append(curr_obj_name)
        if curr_obj_name == nn.modules.module._EXTRA_STATE_KEY_SUFFIX:
            if i != len(obj_names) - 1:
                raise RuntimeError("Expect `_extra_state` to be the last obj name")
        else:
            curr_obj = getattr(curr_obj, curr_obj_name)

    return {".".join(fqn_obj_names).replace(_CHECKPOINT_PREFIX, "")}


@torch.no_grad()
def get_model_state_dict(model):
    state_dict = model.state_dict()
    for key in list(state_dict.keys()):
        fqns = _get_fqns(model, key)
        if len(fqns) != 1:
            raise AssertionError(f"Expected 1 FQN for key '{key}', got {len(fqns)}: {fqns}")
        fqn = next(iter(fqns))
        if fqn != key:
            state_dict[fqn] = state_dict.pop(key)
    return state_dict


def make_model(width):
    return nn.Sequential(nn.Linear(128, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                         nn.Linear(width, 10))


torch.manual_seed(0)
for trial in range(10):
    model = make_model(512)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(5):
        x, y = torch.randn(64, 128), torch.randint(0, 10, (64,))
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    buffer = io.BytesIO()
    torch.save(get_model_state_dict(model), buffer)
    print(f"trial {trial}: loss {loss.item():.4f}, checkpoint {buffer.tell() // 1024} KiB")
    del model, optimizer, loss
