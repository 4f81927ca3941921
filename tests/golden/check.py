"""Diff tests: Lockstep's outputs on small committed fixtures, compared byte for byte with the
expected outputs committed beside them (tests/golden/expected/<case>/).

    python3 tests/golden/check.py --lockstep build/app/lockstep            # compare (ctest golden_outputs)
    python3 tests/golden/check.py --lockstep build/app/lockstep --update   # rewrite the expected outputs

For each case the run file is made (imported from traces, or copied) under the case's name in a
private folder, then `lockstep report`, `lockstep report --json` and `lockstep export --chrome`
are run on it there. A change to any of them shows up here as a diff; when the change is intended,
run the --update command and commit the new expected files with the change that made them.
Fixtures (tests/data/): cpu/run-cpu-2.db, a real `lockstep run` of 2 ranks (gloo, mlp, 6 steps);
cpu/kineto-cpu-rank{0,1}.json.gz, real torch.profiler traces of a 2-rank gloo DDP job
(tests/import/make_ddp_trace.py --steps 4, Debian's torch 1.13); an Nsight Systems export pair
written by tests/golden/make_nsys.py at test time (hand-derived layout, deterministic);
gpu/*, the real H100 files (how each was made is written beside them) where present.
"""
import argparse
import difflib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(os.path.dirname(HERE), "data")
EXPECTED = os.path.join(HERE, "expected")
LARGE = 1 << 20  # bytes: a Chrome trace above this is compared by digest


def cases():
    """name -> (how to make <name>.db in the work folder: ('copy', file) or ('import', [files]))."""
    c = {
        "run-cpu-2": ("copy", [os.path.join(DATA, "cpu", "run-cpu-2.db")]),
        "kineto-cpu-2": ("import", [os.path.join(DATA, "cpu", f"kineto-cpu-rank{r}.json.gz") for r in (0, 1)]),
        "nsys-2": ("import", ["nsys-rank0.sqlite", "nsys-rank1.sqlite"]),
    }
    gpu = os.path.join(DATA, "gpu")
    for db in ("record-nccl-1.db", "record-nccl-tx.db", "record-gloo-cuda-2.db"):
        if os.path.exists(os.path.join(gpu, db)):
            c[db[:-3]] = ("copy", [os.path.join(gpu, db)])
    gloo = [os.path.join(gpu, f"kineto-gloo2-rank-{r}.json.gz") for r in (0, 1)]
    if all(os.path.exists(f) for f in gloo):
        c["kineto-gloo2"] = ("import", gloo)
    return c


def run(cmd, cwd):
    p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.decode(errors='replace')}")
    return p.stdout


def outputs(lockstep, name, how, work):
    kind, files = how
    db = name + ".db"
    if kind == "copy":
        shutil.copyfile(files[0], os.path.join(work, db))
    else:
        # By name in the work folder: the run records what it was imported from, and the
        # expected outputs must not depend on where the repository is checked out.
        names = []
        for f in files:
            name = os.path.basename(f)
            if os.path.isabs(f):
                shutil.copyfile(f, os.path.join(work, name))
            names.append(name)
        run([lockstep, "import", *names, "--out", db, "-q"], work)
    run([lockstep, "export", db, "--chrome", name + ".chrome.json"], work)
    with open(os.path.join(work, name + ".chrome.json"), "rb") as f:
        chrome = f.read()
    out = {
        "report.txt": run([lockstep, "report", db], work),
        "report.json": run([lockstep, "report", db, "--json"], work),
    }
    # A large trace is pinned by its digest (a 10 MB expected file would bloat the repository);
    # a difference there is found by exporting the case again and diffing by hand.
    if len(chrome) > LARGE:
        out["chrome.json.sha256"] = (hashlib.sha256(chrome).hexdigest() + f"  {len(chrome)} bytes\n").encode()
    else:
        out["chrome.json"] = chrome
    return out


def readable(data, file):
    """Lines to diff: JSON pretty-printed (the files themselves are compared byte for byte)."""
    text = data.decode("utf-8", errors="replace")
    if file.endswith(".json"):
        try:
            text = json.dumps(json.loads(text), indent=1, sort_keys=True)
        except ValueError:
            pass
    return text.splitlines()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lockstep", required=True)
    ap.add_argument("--update", action="store_true")
    a = ap.parse_args()
    lockstep = os.path.abspath(a.lockstep)
    failures = 0
    with tempfile.TemporaryDirectory(prefix="lockstep-golden-") as work:
        subprocess.run([sys.executable, os.path.join(HERE, "make_nsys.py"), work], check=True)
        for name, how in cases().items():
            got = outputs(lockstep, name, how, work)
            folder = os.path.join(EXPECTED, name)
            for file, data in got.items():
                path = os.path.join(folder, file)
                if a.update:
                    os.makedirs(folder, exist_ok=True)
                    with open(path, "wb") as f:
                        f.write(data)
                    continue
                if not os.path.exists(path):
                    print(f"FAIL {name}/{file}: no expected output (run with --update)")
                    failures += 1
                    continue
                with open(path, "rb") as f:
                    want = f.read()
                if want == data:
                    print(f"ok   {name}/{file}")
                    continue
                failures += 1
                print(f"FAIL {name}/{file} differs from tests/golden/expected/{name}/{file}:")
                diff = difflib.unified_diff(readable(want, file), readable(data, file), "expected", "got", lineterm="", n=1)
                for i, line in enumerate(diff):
                    if i == 80:
                        print("  ... (diff cut)")
                        break
                    print("  " + line)
    if a.update:
        print(f"updated the expected outputs of {len(cases())} cases in tests/golden/expected")
        return 0
    print(f"golden: {failures} difference(s)" if failures else f"golden: all {len(cases())} cases match")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
