"""The one rule for "slow" that the bisection and the analysis share (fabricase.probe.judge)."""

from fabricase.probe.judge import slow_pairs, slow_sets


def test_against_an_expected_figure_90_percent_passes():
    assert slow_sets([330.0, 324.5, 323.5, None], expected=360.0) == [False, False, True, True]
    assert slow_pairs([361.0, 360.5, 359.0], expected=400.0) == [False, False, True]


def test_one_lucky_set_does_not_make_the_others_slow():
    """Measured in the namespace lab: four healthy pair-sets at once spread 0.069-0.2 GB/s on 2 cores."""
    assert slow_sets([0.116, 0.082, 0.094, 0.2]) == [False] * 4
    assert slow_sets([0.139, 0.105, 0.089, 0.069]) == [False] * 4


def test_slow_sets_that_are_the_majority_still_stand_out():
    """Two suspects' finishing pairs beside one control pair: a median would be a slow one."""
    assert slow_sets([0.0025, 0.0031, 0.1]) == [True, True, False]
    assert slow_sets([0.0025, 0.11]) == [True, False]


def test_alike_sets_are_not_slow_and_no_figure_is():
    assert slow_sets([0.013, 0.013]) == [False, False]
    assert slow_sets([None, 0.05, 0.06]) == [True, False, False]
    assert slow_sets([None, None]) == [True, True]


def test_pairs_against_their_median():
    values = [4.9, 4.9, 0.019, 4.6, 3.8, 4.9, 0.019, 6.8]
    assert slow_pairs(values) == [v < 1 for v in values]
