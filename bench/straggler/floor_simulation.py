#!/usr/bin/env python3
"""Reproduces the number behind the straggler test's step-to-step noise floor
(core/src/stragglers.cpp, criterion 3): with N ranks whose arrivals are pure Gaussian noise, how
far does the difference of medians "candidate's lateness - the other ranks' pooled lateness" move
over n steps, in units of the candidate's own standard error 1.2533 sigma / sqrt(n) (sigma from
the others' pooled lateness, 1.4826 x MAD, as core computes it)? Core uses N/(N-1): the
latenesses of one step sum to zero over the ranks, so the others' mirror the candidate's.

Independent of Lockstep's code (numpy only); lateness as core defines it: a rank's launch minus
the mean of the other ranks' launches in the same step.

Prints `floor_factor_N<k>: measured (formula N/(N-1)) ratio` lines.
Usage: floor_simulation.py [STEPS (57)] [RUNS (4000)]   (Debian's /usr/bin/python3 has numpy)
"""
import sys

import numpy as np

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 57
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 4000
rng = np.random.default_rng(1)
for n_ranks in (2, 3, 4, 8):
    diffs, sigmas = [], []
    for _ in range(runs):
        t = rng.standard_normal((steps, n_ranks))
        lateness = t - (t.sum(axis=1, keepdims=True) - t) / (n_ranks - 1)
        others = lateness[:, 1:].ravel()
        diffs.append(np.median(lateness[:, 0]) - np.median(others))
        sigmas.append(1.4826 * np.median(np.abs(others - np.median(others))))
    se = 1.2533 * np.mean(sigmas) / np.sqrt(steps)
    print("floor_factor_N%d: %.3f (formula %.3f) ratio" % (n_ranks, np.std(diffs) / se, n_ranks / (n_ranks - 1)))
