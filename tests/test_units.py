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
    ("10k", 10_000), ("3KiB", 3 * KiB), (7, 7), (2.0, 2), ("2.0", 2), ("1.5 KiB", 1536),
    ("1.3 KiB", 1331), ("0.0005 KiB", 1), ("1e3", 1000), (10**15, 10**15),
])
def test_parse_bytes(text, n):
    assert parse_bytes(text) == n


@pytest.mark.parametrize("bad", ["", "abc", "12 parsecs", "-5MiB", -1, True])
def test_parse_bytes_rejects(bad):
    with pytest.raises(ValueError):
        parse_bytes(bad)


@pytest.mark.parametrize("bad", ["1.5", 1.5, "2.5 B", 2.5, float("inf"), float("nan"), "1e400",
                                 "1e400 KiB", -0.5])
def test_parse_bytes_never_truncates(bad):
    # the seed turned "1.5" into 1 and 2.5 into 2 without a word
    with pytest.raises(ValueError):
        parse_bytes(bad)


def test_parse_bytes_rejects_non_quantities_with_type_error():
    for bad in (None, [1], b"1 KiB"):
        with pytest.raises(TypeError):
            parse_bytes(bad)
