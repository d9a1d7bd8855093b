"""What the document comparer tolerates (last digits of computed numbers)
and what it does not (words, integers, launch indices, larger errors)."""

import pytest

from textmatch import close, matches, same_line

RECORD = "    inout buf3: shape=(4, 6) dtype=torch.float32 min=-126.212067 max=0.863933 mean=-5.331103 nan_count=0"


def test_a_number_off_in_the_7th_significant_digit_passes():
    assert same_line("min=1.234567", "min=1.234568")
    assert same_line(RECORD, RECORD.replace("-126.212067", "-126.212059"))   # seen on another CPU
    assert same_line("max=1.234567e+29", "max=1.234568e+29")


def test_a_number_off_in_the_4th_significant_digit_fails():
    assert not same_line("min=1.234567", "min=1.235567")
    assert not same_line(RECORD, RECORD.replace("-126.212067", "-126.312067"))
    assert not same_line("max=1.234567e+29", "max=1.235567e+29")


def test_a_changed_word_fails():
    assert not same_line(RECORD, RECORD.replace("inout", "in"))
    assert not same_line(RECORD, RECORD.replace("float32", "float64"))
    assert not same_line("min=-inf max=1.000000", "min=nan max=1.000000")


@pytest.mark.parametrize("shown, printed", [
    ("nan_count=0", "nan_count=1"),                        # integers are exact
    ("shape=(4, 6)", "shape=(4, 7)"),
    ("ranker.py:33", "ranker.py:34"),                      # line numbers
    ("launch 1.3 k", "launch 1.4 k"),                      # launch indices
    ("launch 1.1 k", "launch 1.10 k"),                     # same value, another launch
    ("launch 100.1000 k", "launch 100.1001 k"),
    ("1.1000 k", "1.1001 k"),                              # a launch list without the word
    ("PyTorch version: 2.13.0+cpu", "PyTorch version: 2.13.1+cpu"),
    ("max=1.000000", "max=1.000000 "),                     # any other character
    ("mean=0.5", "mean=0.500000"),                         # a different printed precision
])
def test_everything_but_float_digits_is_exact(shown, printed):
    assert not same_line(shown, printed)


def test_near_zero_statistics_agree_to_their_last_printed_place():
    assert same_line("mean=0.000001", "mean=-0.000000")
    assert not same_line("mean=0.000003", "mean=0.000001")


def test_close_on_tokens():
    assert close("2", "2") and not close("2", "3") and not close("2", "2.0")
    assert not close("0.12", "0.13") and not close("126.2", "126.21")   # short fractions are exact
    assert close("1e-05", "1.000001e-05") is False          # different shape: no fraction on one side
    assert close("1.00000e-05", "1.00001e-05")


def test_matches_with_abridged_lines_and_tolerance():
    shown = ["NaN/Inf origin: launch 1.3 k", "...", "  min=-126.212067", "done"]
    assert matches(shown, ["NaN/Inf origin: launch 1.3 k", "x", "y", "  min=-126.212059", "done"])
    assert matches(shown, ["NaN/Inf origin: launch 1.3 k", "  min=-126.212059", "done"])
    assert not matches(shown, ["NaN/Inf origin: launch 1.4 k", "  min=-126.212059", "done"])
    assert not matches(shown, ["NaN/Inf origin: launch 1.3 k", "  min=-126.3", "done"])
    assert not matches(shown, ["NaN/Inf origin: launch 1.3 k", "  min=-126.212059"])


def test_a_content_hash_matches_any_content_hash_and_nothing_else():
    assert same_line("      hash=8d76fdcd3779af49", "      hash=0123456789abcdef")
    assert not same_line("      hash=8d76fdcd3779af49", "      hash=8d76fdcd3779af4")
    assert not same_line("      hash=8d76fdcd3779af49", "      sum=8d76fdcd3779af49")
    assert not same_line("  out buf2 hash 6e78cc55d9d3ad94", "  out buf2 hash 423197f498a16a6d")
