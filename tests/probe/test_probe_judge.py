"""The one rule for "slow" that the bisection and the analysis share (fabricase.probe.judge)."""

from fabricase.probe.judge import again_pairs, slow_pairs, slow_sets


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


def test_the_pairs_run_again_are_those_the_analysis_calls_slow():
    assert again_pairs([390.0, 200.0, None], 400.0, 4) == [False, True, False]  # no figure: not run again
    # Every pair below the expected rate: judged against one another, as the analysis then does.
    assert again_pairs([300.0, 301.0, 60.0, 299.0], 400.0, 4) == [False, False, True, False]
    assert again_pairs([300.0, 301.0, 299.0], 400.0, 4) == [False, False, False]
    # Two hosts are one pair: against the expected rate still (the analysis names both hosts then).
    assert again_pairs([300.0, 301.0], 400.0, 2) == [True, True]
    assert again_pairs([4.9, 0.019, 4.6], None, 3) == [False, True, False]
