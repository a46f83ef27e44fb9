"""The statement that closes a cycle through an autograd node: a hook that holds ``self``."""

from __future__ import annotations

import textwrap

import pytest

from torchmem.doctor.hook_cycles import self_hook_site


def _site(tmp_path, body: str):
    path = tmp_path / "m.py"
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return self_hook_site([str(path)])


@pytest.mark.parametrize("register, hook", [
    ("out.register_hook(self.save)", "self.save"),
    ("out.grad_fn.register_hook(functools.partial(clear, self))", "functools.partial(clear, self)"),
    ("out.register_hook(lambda g: self.save(g))", "lambda g: self.save(g)"),
])
def test_a_hook_that_holds_self_is_found_at_its_registration(tmp_path, register, hook):
    found = _site(tmp_path, f"""
        import functools

        class Explainer:
            def save(self, g):
                self.g = g

            def __call__(self, out):
                self.kept = out
                {register}
                return out
        """)
    assert found is not None
    stmt, name = found
    assert (stmt.line, name, stmt.function) == (10, hook, "__call__")


def test_a_named_partial_or_nested_function_that_holds_self(tmp_path):
    found = _site(tmp_path, """
        import functools

        class Strategy:
            def cache(self, t):
                wrapper = functools.partial(print, self)
                t.grad_fn.register_hook(wrapper)
        """)
    assert found is not None and found[1] == "wrapper" and found[0].line == 7
    found = _site(tmp_path, """
        class Strategy:
            def cache(self, t):
                def on_grad(g):
                    self.g = g
                t.register_hook(on_grad)
        """)
    assert found is not None and found[1] == "on_grad"


def test_hooks_that_do_not_hold_self_or_several_candidates_name_nothing(tmp_path):
    assert _site(tmp_path, """
        class Clipper:
            def __call__(self, t):
                t.register_hook(lambda g: g.clamp(-1, 1))
        """) is None
    assert _site(tmp_path, """
        def train(t, log):
            t.register_hook(log.append)
        """) is None
    assert _site(tmp_path, """
        class A:
            def f(self, t):
                t.register_hook(self.g)
            def h(self, t):
                t.register_hook(self.g)
        """) is None
