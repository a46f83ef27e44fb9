# Source: https://github.com/likenneth/honest_llama/issues/26
#   code: get_activations.py and utils.py (tokenized_tqa, get_llama_activations_bau) at commit
#   2b9a3f6, before the two copy() calls the maintainer added
# Adapted: main(), tokenized_tqa and get_llama_activations_bau kept as they were (main keeps the
#   tqa_mc2 branch only); packages torchmem does not install are replaced by stubs with the same
#   interface: baukit's TraceDict (forward hooks keeping each named module's output), the llama
#   package's LLaMATokenizer / LLaMAForCausalLM (a 6-layer model with hidden size 128 whose
#   layers have self_attn.o_proj and mlp, returning hidden_states), datasets' load_dataset
#   (60 random TruthfulQA-like questions with two mc2 choices each) and tqdm; the positional
#   arguments get defaults (nargs='?'); `device = "cuda"` -> "cpu"; the .npy files go to a
#   temporary directory instead of features/; seeded.
import os
import tempfile
from collections import OrderedDict
import torch
import torch.nn as nn
import numpy as np
import pickle
import argparse
import types


# ---- stubs for packages not installed (same interfaces) ----
def tqdm(iterable):
    return iterable


class Trace:
    def __init__(self, module):
        self.output = None
        self.handle = module.register_forward_hook(self._hook)

    def _hook(self, module, inputs, output):
        self.output = output

    def close(self):
        self.handle.remove()


class TraceDict(OrderedDict):
    def __init__(self, module, layers):
        super().__init__()
        named = dict(module.named_modules())
        for layer in layers:
            self[layer] = Trace(named[layer])

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for trace in self.values():
            trace.close()


class _Attention(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.qkv = nn.Linear(hidden, hidden)
        self.o_proj = nn.Linear(hidden, hidden)

    def forward(self, x):
        return self.o_proj(torch.tanh(self.qkv(x)))


class _Layer(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.self_attn = _Attention(hidden)
        self.mlp = nn.Sequential(nn.Linear(hidden, 2 * hidden), nn.GELU(), nn.Linear(2 * hidden, hidden))

    def forward(self, x):
        x = x + self.self_attn(x)
        return x + self.mlp(x)


class _Decoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(_Layer(config.hidden_size) for _ in range(config.num_hidden_layers))


class LLaMAForCausalLM(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.model = _Decoder(config)

    @classmethod
    def from_pretrained(cls, name, **kwargs):
        return cls(types.SimpleNamespace(vocab_size=1000, hidden_size=128, num_hidden_layers=6))

    def forward(self, input_ids, output_hidden_states=False):
        x = self.model.embed_tokens(input_ids)
        hidden_states = [x]
        for layer in self.model.layers:
            x = layer(x)
            hidden_states.append(x)
        return types.SimpleNamespace(hidden_states=tuple(hidden_states))


class LLaMATokenizer:
    @classmethod
    def from_pretrained(cls, name):
        return cls()

    def __call__(self, text, return_tensors='pt'):
        ids = [hash(word) % 1000 for word in text.split()]
        return types.SimpleNamespace(input_ids=torch.tensor([ids]))


llama = types.SimpleNamespace(LLaMATokenizer=LLaMATokenizer, LLaMAForCausalLM=LLaMAForCausalLM)


def load_dataset(name, config):
    rng = np.random.default_rng(0)
    words = ["what", "is", "the", "capital", "of", "a", "country", "who", "wrote", "book", "true", "false"]
    rows = []
    for _ in range(60):
        question = " ".join(rng.choice(words, size=rng.integers(30, 60)))
        choices = [" ".join(rng.choice(words, size=rng.integers(20, 40))) for _ in range(2)]
        rows.append({"question": question, "mc2_targets": {"choices": choices, "labels": [1, 0]}})
    return {"validation": rows}
# ---- end of stubs ----


def format_truthfulqa(question, choice):
    return f"Q: {question} A: {choice}"

def tokenized_tqa(dataset, tokenizer): 

    all_prompts = []
    all_labels = []
    for i in range(len(dataset)):
        question = dataset[i]['question']
        choices = dataset[i]['mc2_targets']['choices']
        labels = dataset[i]['mc2_targets']['labels']

        assert len(choices) == len(labels), (len(choices), len(labels))

        for j in range(len(choices)): 
            choice = choices[j]
            label = labels[j]
            prompt = format_truthfulqa(question, choice)
            if i == 0 and j == 0: 
                print(prompt)
            prompt = tokenizer(prompt, return_tensors = 'pt').input_ids
            all_prompts.append(prompt)
            all_labels.append(label)
    
    return all_prompts, all_labels

def get_llama_activations_bau(model, prompt, device): 

    HEADS = [f"model.layers.{i}.self_attn.o_proj" for i in range(model.config.num_hidden_layers)]
    MLPS = [f"model.layers.{i}.mlp" for i in range(model.config.num_hidden_layers)]

    with torch.no_grad():
        prompt = prompt.to(device)
        with TraceDict(model, HEADS+MLPS) as ret:
            output = model(prompt, output_hidden_states = True)
        hidden_states = output.hidden_states
        hidden_states = torch.stack(hidden_states, dim = 0).squeeze()
        hidden_states = hidden_states.detach().cpu().numpy()
        head_wise_hidden_states = [ret[head].output.squeeze().detach().cpu() for head in HEADS]
        head_wise_hidden_states = torch.stack(head_wise_hidden_states, dim = 0).squeeze().numpy()
        mlp_wise_hidden_states = [ret[mlp].output.squeeze().detach().cpu() for mlp in MLPS]
        mlp_wise_hidden_states = torch.stack(mlp_wise_hidden_states, dim = 0).squeeze().numpy()

    return hidden_states, head_wise_hidden_states, mlp_wise_hidden_states


def main(): 
    """
    Specify dataset name as the first command line argument. Current options are 
    "tqa_mc2", "piqa", "rte", "boolq", "copa". Gets activations for all prompts in the 
    validation set for the specified dataset on the last token for llama-7B. 
    """

    parser = argparse.ArgumentParser()
    parser.add_argument('model_name', type=str, nargs='?', default='llama_7B')
    parser.add_argument('dataset_name', type=str, nargs='?', default='tqa_mc2')
    parser.add_argument('--device', type=int, default=0)
    args = parser.parse_args()
    HF_NAMES = {
        'llama_7B': 'decapoda-research/llama-7b-hf', 
        'llama_13B': 'decapoda-research/llama-13b-hf', 
        'alpaca_7B': 'circulus/alpaca-7b', 
        'vicuna_7B': 'AlekseyKorshuk/vicuna-7b', 
    }

    MODEL = HF_NAMES[args.model_name]

    tokenizer = llama.LLaMATokenizer.from_pretrained(MODEL)
    model = llama.LLaMAForCausalLM.from_pretrained(MODEL, low_cpu_mem_usage=True, torch_dtype=torch.float16, device_map="auto")
    device = args.device
    device = "cpu"
    r = model.to(device)

    if args.dataset_name == "tqa_mc2": 
        dataset = load_dataset("truthful_qa", "multiple_choice")['validation']
        formatter = tokenized_tqa
    else: 
        raise ValueError("Invalid dataset name")

    print("Tokenizing prompts")
    prompts, labels = formatter(dataset, tokenizer)

    all_layer_wise_activations = []
    all_head_wise_activations = []

    print("Getting activations")
    for prompt in tqdm(prompts):
        layer_wise_activations, head_wise_activations, _ = get_llama_activations_bau(model, prompt, device)
        all_layer_wise_activations.append(layer_wise_activations[:,-1,:])
        all_head_wise_activations.append(head_wise_activations[:,-1,:])

    features = tempfile.mkdtemp()
    print("Saving labels")
    np.save(f'{features}/{args.model_name}_{args.dataset_name}_labels.npy', labels)

    print("Saving layer wise activations")
    np.save(f'{features}/{args.model_name}_{args.dataset_name}_layer_wise.npy', all_layer_wise_activations)
    
    print("Saving head wise activations")
    np.save(f'{features}/{args.model_name}_{args.dataset_name}_head_wise.npy', all_head_wise_activations)

if __name__ == '__main__':
    torch.manual_seed(0)
    main()
