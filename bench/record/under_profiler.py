#!/usr/bin/python3
# Runs an unchanged training script under torch.profiler (CPU activities, the usual settings for
# a DDP job on CPU), the way users profile a DDP job today, and writes the trace when the
# script ends (outside any timed step). Usage: under_profiler.py TRACE.json SCRIPT ARGS...
import os
import runpy
import sys

import torch
from torch.profiler import ProfilerActivity, profile

trace, script = sys.argv[1], sys.argv[2]
sys.argv = sys.argv[2:]
sys.path[0] = os.path.dirname(os.path.abspath(script))
with profile(activities=[ProfilerActivity.CPU]) as prof:
    runpy.run_path(script, run_name="__main__")
prof.export_chrome_trace(trace)
