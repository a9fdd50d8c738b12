"""Active tests across hosts, for faults that leave the counters clean (`fabricase probe`, `open --probe`).

- `plan`: which hosts test against which (ring pairs) and the bisection (pure);
- `judge`: the one rule for "slow", shared by the bisection and the analysis;
- `exec`, `srun`: running one tagged, time-limited command on a host (ssh, this machine, srun in a job);
- `run`, `stages`: the probe itself, round by round, with its budget, sweep and Ctrl-C;
- `facts`: rails, port rates, GID index and GPU count from the capture; `store`, `model`: the results as capture
  items and probe.json.

The analysis of a stored probe is `fabricase.analysis.probe`; docs/probe.md says what runs and how to read it.
"""
