"""Functions of a file that only ever run as evaluation code, judged by their callers."""

from __future__ import annotations

import ast

from torchmem.lint.eval_callers import eval_functions, mentions_eval


def evaluation(source: str) -> set[str]:
    tree = ast.parse(source)
    # imported names as the engine resolves them: here every dotted name is its own
    ids = eval_functions(tree, lambda node: ast.unparse(node)
                         if isinstance(node, ast.Attribute) else None)
    return {n.name for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and id(n) in ids}


def test_called_after_eval_by_a_caller_that_never_trains():
    assert evaluation('''
def run(model, batches):
    for b in batches:
        print(model(b).sum().item())

def inner(model, batches):
    run(model, batches)

def validate(model, batches):
    model.eval()
    inner(model, batches)
''') == {"run", "inner"}


def test_methods_through_self():
    assert evaluation('''
class Trainer:
    def _steps(self, batches):
        for b in batches:
            self.model(b)

    def on_epoch_end(self, batches):
        self.model.eval()
        self._steps(batches)
''') == {"_steps"}


def test_calls_that_do_not_count():
    source = '''
def before_eval(model, x):
    return model(x)

def returned(model, x):
    return model(x)

def returned_by_name(model, x):
    return model(x)

def trained_too(model, x):
    return model(x)

def branch(model, x):
    return model(x)

def next_iteration(model, x):
    return model(x)

def callback(model, x):
    return model(x)

def nested(model, x):
    return model(x)

def score(model, x):
    before_eval(model, x)
    model.eval()
    out = returned_by_name(model, x)
    trained_too(model, x)
    map(callback, [x])

    def later():
        nested(model, x)

    later()
    return returned(model, x), out

def fit(model, x, optimizer):
    trained_too(model, x).sum().backward()
    optimizer.step()

def switch(model, x, is_train):
    if is_train:
        model.train()
    else:
        model.eval()
    branch(model, x)

def epochs(model, x, n):
    model.eval()
    for _ in range(n):
        next_iteration(model, x)
        model.train()
'''
    assert mentions_eval(source)
    assert evaluation(source) == set()


def test_no_grad_calls_are_neutral_but_one_evaluation_call_is_needed():
    assert evaluation('''
import torch

def run(model, x):
    return model(x).sum().item()

def only_no_grad(model, x):
    return model(x).sum().item()

def validate(model, x):
    model.eval()
    with torch.no_grad():
        run(model, x)
        only_no_grad(model, x)
    run(model, x)
''') == {"run"}


def test_files_without_eval_are_skipped():
    assert not mentions_eval("def f(model, x):\n    return model(x)\n")
