"""Where a variable carried across loop iterations enters the iteration."""

from __future__ import annotations


def test_chain_entry_doctests_and_nested_loops():
    import ast
    import doctest

    from torchmem.doctor import chain_entry as module
    from torchmem.doctor.chain_entry import chain_entry

    assert doctest.testmod(module).failed == 0
    src = ("h = init()\n"
           "for epoch in range(2):\n"
           "    h = reset(h)\n"
           "    for x in data:\n"
           "        z = enc(x)\n"
           "        out = rnn(z, h)\n"
           "        h = out[1]\n")
    tree = ast.parse(src)
    rebinding = tree.body[1].body[1].body[2]
    # the innermost loop around the rebinding: its first read of `h` is `rnn(z, h)`
    assert chain_entry(tree, rebinding, "h").lineno == 6
    # read nowhere before the rebinding in its loop: the rebinding itself
    rebinding = tree.body[1].body[0]
    assert chain_entry(tree, rebinding, "h") is rebinding
