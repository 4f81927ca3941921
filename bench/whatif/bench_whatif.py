#!/usr/bin/python3
"""What-if proof against reality: predicted vs measured step time (prints `name: value unit`).

For each model (mlp, transformer, convnet) the script records a 2-rank run at 25 MiB buckets (the
base) and a 1-rank run, predicts from them with `lockstep predict`, runs every predicted
configuration for real with `lockstep run`, and compares:
  - bucket caps 1, 4, 25, 100 MiB (2 ranks)              predicted from the 2-rank base
  - emulated links LINKS Gbit/s at 25 MiB (2 ranks)       predicted from the 2-rank base
  - world size 2 -> 1 (25 MiB)                            predicted from the 2-rank base
  - world size 1 -> 2 (25 MiB, link LINKS[0] Gbit/s)     predicted from the 1-rank base (a 1-rank
    run has no all-reduce to fit the link from: the emulated link is what it can predict)
and whether `lockstep advise` (candidates = the caps above) names the cap measured fastest.

Robust on a shared machine:
  - every configuration runs REPEATS times, the repeats interleaved (all configurations of all
    models, then again), so load that drifts over minutes hits every configuration alike;
  - one number per run file, the same for measured and predicted runs: the median over steady
    steps (step >= WARMUP) of the step time averaged over ranks (a median: a step that lost the
    CPU to another process does not move it);
  - measured = median over the repeats' run files; predicted = median over the predictions made
    from each repeat's base (each a prediction from one run);
  - the load average before and after is printed: the numbers are only as quiet as the machine.
Error = (predicted - measured) / measured. whatif_median_err_pct / whatif_p90_err_pct are the
median / 90th percentile of |error| over all compared configurations (goals: <= 5, <= 10).

Usage: bench_whatif.py [LOCKSTEP_BINARY]
  env: MODELS (mlp,transformer,convnet) REPEATS (2) STEPS (16) WARMUP (4) CAPS (1,4,25,100)
       LINKS (1,4) KEEP=DIR (keep run files there; default a temporary folder, removed)
       REUSE=1 (with KEEP: runs already in DIR are not run again, e.g. to redo the analysis)
The noise floor: the base and the "25 MiB, 2 ranks" runs are the same configuration run twice;
whatif_same_config_diff_pct is how far apart their medians are. No prediction can be trusted to
be closer to a measurement than the measurements are to each other.
"""
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CLI = sys.argv[1] if len(sys.argv) > 1 else os.environ.get(
    "LOCKSTEP_CLI", os.path.join(HERE, "..", "..", "build", "app", "lockstep"))
MODELS = os.environ.get("MODELS", "mlp,transformer,convnet").split(",")
REPEATS = int(os.environ.get("REPEATS", "2"))
STEPS = int(os.environ.get("STEPS", "16"))
WARMUP = int(os.environ.get("WARMUP", "4"))
CAPS = [float(c) for c in os.environ.get("CAPS", "1,4,25,100").split(",")]
LINKS = [float(x) for x in os.environ.get("LINKS", "1,4").split(",")]
REUSE = os.environ.get("REUSE") == "1" and os.environ.get("KEEP")
BASE_CAP = 25.0

# Sizes: steps of a few hundred ms on this machine's reference BLAS, with gradients large enough
# that communication is a visible part of the step (mlp 32 MiB, transformer 12 MiB, convnet 5 MiB).
MODEL_FLAGS = {
    "mlp": ["--model", "mlp", "--layers", "8", "--width", "1024", "--batch", "4"],
    "transformer": ["--model", "transformer", "--layers", "4", "--width", "256", "--heads", "4",
                    "--seq", "8", "--batch", "2"],
    "convnet": ["--model", "convnet", "--layers", "2", "--width", "192", "--batch", "2"],
}
# One thread per rank at every world size: per-rank compute is the same work on 1 and 2 ranks.
COMMON = ["--threads", "1", "--steps", str(STEPS), "--warmup", str(WARMUP), "--first-bucket-mb", "1",
          "--progress", "none", "--force"]


def num(x):
    return ("%g" % x)


# (key, nproc, bucket MiB, link Gbit/s): every configuration that runs for real
def configurations():
    out = [("base2", 2, BASE_CAP, 0.0), ("base1", 1, BASE_CAP, 0.0)]
    out += [("cap%s" % num(c), 2, c, 0.0) for c in CAPS]
    out += [("link%s" % num(x), 2, BASE_CAP, x) for x in LINKS]
    return out


def run(args, check=True):
    p = subprocess.run([CLI] + args, capture_output=True, text=True)
    if check and p.returncode != 0:
        raise RuntimeError("lockstep %s failed (%d): %s" % (" ".join(args[:1]), p.returncode, p.stderr.strip()))
    return p


def step_stat_ms(path):
    """Median over steady steps of the mean-over-ranks step time (ms)."""
    db = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
    try:
        per_step = {}
        for step, dur in db.execute("SELECT step, end_ns - start_ns FROM steps WHERE step >= ?", (WARMUP,)):
            per_step.setdefault(step, []).append(dur)
    finally:
        db.close()
    if not per_step:
        raise RuntimeError("%s has no steady step" % path)
    return statistics.median(statistics.mean(v) for v in per_step.values()) / 1e6


def record(model, key, nproc, cap, link, path):
    args = ["run", "--nproc", str(nproc), "--bucket-mb", num(cap), "--out", path] + MODEL_FLAGS[model] + COMMON
    if link > 0:
        args += ["--link-gbps", num(link)]
    for attempt in range(2):  # one retry: a rank can lose its rendezvous port to another process
        p = run(args, check=False)
        if p.returncode == 0:
            return True
        print("# %s %s: run failed (attempt %d): %s" % (model, key, attempt + 1, p.stderr.strip()[-300:]),
              flush=True)
    return False


def predict_files(base, out_dir, extra):
    """`lockstep predict BASE EXTRA --out-dir OUT`: one predicted run file per configuration."""
    run(["predict", base, "--out-dir", out_dir, "--force"] + extra)


def predicted_file(out_dir, base, cap, nproc, link):
    stem = os.path.splitext(os.path.basename(base))[0]
    name = "%s.predict-b%s-f1-n%d%s.db" % (stem, num(cap), nproc, ("-l" + num(link)) if link > 0 else "")
    path = os.path.join(out_dir, name)
    if not os.path.exists(path):
        raise RuntimeError("lockstep predict did not write " + path)
    return path


def percentile(values, q):
    v = sorted(values)
    if not v:
        return float("nan")
    k = (len(v) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def main():
    keep = os.environ.get("KEEP")
    work = keep or tempfile.mkdtemp(prefix="lockstep-bench-whatif-")
    os.makedirs(work, exist_ok=True)
    print("# lockstep: %s; models %s; repeats %d; steps %d (warmup %d); caps %s MiB; links %s Gbit/s"
          % (CLI, ",".join(MODELS), REPEATS, STEPS, WARMUP, ",".join(num(c) for c in CAPS),
             ",".join(num(x) for x in LINKS)))
    print("load_avg_start: %.2f" % os.getloadavg()[0], flush=True)

    # Real runs, interleaved: repeat r of every configuration of every model, then repeat r+1.
    runs = {}  # (model, key) -> [paths]
    for r in range(REPEATS):
        for model in MODELS:
            for key, nproc, cap, link in configurations():
                path = os.path.join(work, "%s-%s-r%d.db" % (model, key, r))
                if (REUSE and os.path.exists(path)) or record(model, key, nproc, cap, link, path):
                    runs.setdefault((model, key), []).append(path)
                    print("# ran %s %s r%d: %.1f ms" % (model, key, r, step_stat_ms(path)), flush=True)

    errors = []
    by_kind = {}  # caps | links | world -> |error| list
    noise = []
    advised_best = 0
    for model in MODELS:
        print("\n# %s: configuration, predicted ms, measured ms (min..max of repeats), error" % model)
        preds = {}  # compared key -> [predicted ms per base]
        advised = []
        for base in runs.get((model, "base2"), []):
            out = os.path.join(work, "pred-" + os.path.splitext(os.path.basename(base))[0])
            predict_files(base, out, ["--bucket-mb", ",".join(num(c) for c in CAPS)])
            predict_files(base, out, ["--link-gbps", ",".join(num(x) for x in LINKS)])
            predict_files(base, out, ["--nproc", "1"])
            for c in CAPS:
                preds.setdefault("cap%s" % num(c), []).append(step_stat_ms(predicted_file(out, base, c, 2, 0)))
            for x in LINKS:
                preds.setdefault("link%s" % num(x), []).append(step_stat_ms(predicted_file(out, base, BASE_CAP, 2, x)))
            preds.setdefault("base1", []).append(step_stat_ms(predicted_file(out, base, BASE_CAP, 1, 0)))
            a = json.loads(run(["advise", base, "--json", "--first-bucket-mb", "1", "--bucket-mb",
                                ",".join(num(c) for c in CAPS)]).stdout)
            advised.append(a["best"]["bucket_cap_bytes"] / 2**20)
        for base in runs.get((model, "base1"), []):
            out = os.path.join(work, "pred-" + os.path.splitext(os.path.basename(base))[0])
            predict_files(base, out, ["--nproc", "2", "--link-gbps", num(LINKS[0])])
            preds.setdefault("1to2", []).append(step_stat_ms(predicted_file(out, base, BASE_CAP, 2, LINKS[0])))

        compared = [("cap%s" % num(c), "cap%s" % num(c), "%s MiB, 2 ranks" % num(c)) for c in CAPS]
        compared += [("link%s" % num(x), "link%s" % num(x), "25 MiB, 2 ranks, link %s Gbit/s" % num(x)) for x in LINKS]
        compared += [("base1", "base1", "25 MiB, 2 -> 1 rank"),
                     ("1to2", "link%s" % num(LINKS[0]), "25 MiB, 1 -> 2 ranks, link %s Gbit/s" % num(LINKS[0]))]
        measured_caps = {}
        for pkey, mkey, label in compared:
            measured_runs = [step_stat_ms(p) for p in runs.get((model, mkey), [])]
            if pkey not in preds or not measured_runs:
                print("%s %s: not compared (a run failed)" % (model, label))
                continue
            pred = statistics.median(preds[pkey])
            meas = statistics.median(measured_runs)
            err = (pred - meas) / meas * 100
            errors.append(abs(err))
            by_kind.setdefault("caps" if pkey.startswith("cap") else "links" if pkey.startswith("link") else "world",
                               []).append(abs(err))
            if pkey.startswith("cap"):
                measured_caps[float(pkey[3:])] = meas
            print("%-11s %-40s predicted %8.1f ms  measured %8.1f ms (%7.1f..%7.1f)  error %+6.1f%%"
                  % (model, label, pred, meas, min(measured_runs), max(measured_runs), err))
        same = [step_stat_ms(p) for p in runs.get((model, "base2"), [])]
        again = [step_stat_ms(p) for p in runs.get((model, "cap%s" % num(BASE_CAP)), [])]
        if same and again:
            diff = abs(statistics.median(again) - statistics.median(same)) / statistics.median(same) * 100
            noise.append(diff)
            print("whatif_same_config_diff_pct_%s: %.1f %%" % (model, diff))
        if advised and measured_caps:
            adv = statistics.median_low(advised)
            best = min(measured_caps, key=measured_caps.get)
            gap = (measured_caps.get(adv, float("nan")) - measured_caps[best]) / measured_caps[best] * 100
            advised_best += adv == best
            print("whatif_advised_cap_mb_%s: %s MiB" % (model, num(adv)))
            print("whatif_measured_best_cap_mb_%s: %s MiB" % (model, num(best)))
            print("whatif_advised_cap_measured_gap_pct_%s: %.1f %%" % (model, gap))

    print()
    print("whatif_configs: %d" % len(errors))
    print("whatif_median_err_pct: %.1f %%" % (statistics.median(errors) if errors else float("nan")))
    print("whatif_p90_err_pct: %.1f %%" % percentile(errors, 0.9))
    print("whatif_max_err_pct: %.1f %%" % (max(errors) if errors else float("nan")))
    for kind in ("caps", "links", "world"):
        if kind in by_kind:
            print("whatif_median_err_pct_%s: %.1f %% (%d configurations)"
                  % (kind, statistics.median(by_kind[kind]), len(by_kind[kind])))
    print("whatif_advised_is_measured_best: %d of %d models" % (advised_best, len(MODELS)))
    if noise:
        print("whatif_same_config_diff_pct: %.1f %% (median over models: the noise floor)" % statistics.median(noise))
    print("load_avg_end: %.2f" % os.getloadavg()[0])
    if not keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
