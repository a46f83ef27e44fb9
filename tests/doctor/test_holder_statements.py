"""Moving a finding to the statement that stored what its culprit keeps (plain data)."""

from __future__ import annotations

from torchmem.doctor.holder_statements import _binds_itself, _stored_by
from torchmem.model.holders import HeldStorage, HolderPath, HoldersMoment


def test_a_binding_of_the_culprit_itself_is_recognised():
    assert _binds_itself("corpus = [Sentence(", "corpus")
    assert _binds_itself("self.history = []", "trainer.history")
    assert _binds_itself("self.h: list = []", "t.h")
    assert not _binds_itself("corpus.append(x)", "corpus")
    assert not _binds_itself("self.history == x", "trainer.history")
    assert not _binds_itself("logs['a'] = 1", "logs['a']")
    assert not _binds_itself(None, "corpus")


def _storage(path: str, line: int) -> HeldStorage:
    holder = HolderPath(path=path, kind="item", detail="", file="t.py", line=line,
                        code="self.v[k] = x", function="<module>")
    return HeldStorage(nbytes=1024, device="cpu", dtype="float32", shape=(4,), role="other",
                       name=None, holders=(holder,))


def test_the_statement_that_stored_most_of_what_the_culprit_reaches():
    moment = HoldersMoment(when="peak", step=8, used={}, tensor_bytes=4096, storages=(
        _storage("corpus[0].v['a']", 12), _storage("corpus[1].v['a']", 12),
        _storage("corpus[2].w", 30), _storage("other[0]", 40)))
    (file, function, line), example, count = _stored_by([moment], "corpus")
    assert (file, line, example, count) == ("t.py", 12, "corpus[0].v['a']", 2)
    # no statement stored a majority: nothing is moved
    split = HoldersMoment(when="peak", step=8, used={}, tensor_bytes=4096, storages=(
        _storage("corpus[0].v", 12), _storage("corpus[1].w", 30)))
    assert _stored_by([split], "corpus") is None
    assert _stored_by([moment], "corpusx") is None
