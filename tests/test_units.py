"""Byte formatting and parsing."""

import pytest

from torchmem.units import GiB, KiB, MiB, format_bytes, format_delta, parse_bytes


@pytest.mark.parametrize("n, text", [
    (0, "0 B"), (512, "512 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (1536, "1.5 KiB"),
    (12.4 * MiB, "12.4 MiB"), (2.3 * GiB, "2.3 GiB"), (-3 * MiB, "-3.0 MiB"),
])
def test_format_bytes(n, text):
    assert format_bytes(n) == text


def test_format_delta_is_signed():
    assert format_delta(MiB) == "+1.0 MiB"
    assert format_delta(-2) == "-2 B"
    assert format_delta(0) == "+0 B"


@pytest.mark.parametrize("text, n", [
    ("4096", 4096), ("1.5GiB", int(1.5 * GiB)), ("512 MiB", 512 * MiB), ("2GB", 2 * 10**9),
    ("10k", 10_000), ("3KiB", 3 * KiB), (7, 7), (2.5, 2),
])
def test_parse_bytes(text, n):
    assert parse_bytes(text) == n


@pytest.mark.parametrize("bad", ["", "abc", "12 parsecs", "-5MiB", -1, True])
def test_parse_bytes_rejects(bad):
    with pytest.raises(ValueError):
        parse_bytes(bad)
