"""The curated public API: every name resolves, and ``import torchmem`` stays light."""

import subprocess
import sys

import pytest

import torchmem


def test_every_public_name_resolves_from_its_module():
    for name in torchmem.__all__:
        assert getattr(torchmem, name) is not None, name


def test_unknown_names_raise_attribute_error():
    with pytest.raises(AttributeError, match="no_such_name"):
        torchmem.no_such_name  # noqa: B018


def test_import_is_light():
    code = ("import sys, torchmem, torchmem.lint; "
            "heavy = [m for m in ('torch', 'rich', 'jinja2', 'libcst') if m in sys.modules]; "
            "print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_holders_is_public_and_lazy():
    assert "holders" in torchmem.__all__ and "Holder" in torchmem.__all__
    code = ("import sys, torchmem; torchmem.holders; "
            "print('torchmem.doctor.holders_api' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"
    assert callable(torchmem.holders) and torchmem.Holder.__name__ == "Holder"
