"""Top-level names of a script bound to an instance of one class of the file."""

from __future__ import annotations

import ast
import textwrap

from torchmem.lint.instances import module_instances


def _instances(source: str) -> dict[str, str]:
    tree = ast.parse(textwrap.dedent(source))
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    return module_instances(tree, classes)


def test_names_bound_under_main_guard_and_blocks_are_found() -> None:
    found = _instances("""
        class Trainer: pass
        class Meter: pass
        if __name__ == "__main__":
            trainer = Trainer()
            with open("x") as f:
                meter: Meter = Meter()
        try:
            again = Trainer()
        except ValueError:
            pass
        """)
    assert found == {"trainer": "Trainer", "meter": "Meter", "again": "Trainer"}


def test_names_bound_otherwise_anywhere_at_top_level_are_left_out() -> None:
    found = _instances("""
        import trainer as lib
        class Trainer: pass
        class Other: pass
        two = Trainer()
        two = Other()
        loop = Trainer()
        for loop in range(3):
            pass
        ctx = Trainer()
        with open("x") as ctx:
            pass
        lib = Trainer()
        err = Trainer()
        try:
            pass
        except ValueError as err:
            pass
        a = b = Trainer()
        c, d = Trainer(), Trainer()
        made = Unknown()
        def helper():
            inner = Trainer()
        """)
    assert found == {"a": "Trainer", "b": "Trainer"}
