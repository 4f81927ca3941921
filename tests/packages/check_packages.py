#!/usr/bin/python3
"""The package guard: every file the build took from the system must come from a Debian package
that scripts/setup.sh installs, directly or through its Depends.

Why: the development machine had libqt6opengl6-dev installed by hand, so CI stayed green while
`bash scripts/demo.sh` failed at configure on a fresh Debian 12. CI runs on a machine where
earlier sessions installed things, so "it builds here" proves nothing about a fresh machine; this
test does, from the evidence the build leaves behind:

  - the CMake package configurations found (`<Pkg>_DIR` entries of CMakeCache.txt);
  - every system header the compiler read (the `.o.d` dependency files next to each object);
  - every library the built binaries link: the files named on link lines (link.txt) and what the
    dynamic loader resolves for each built ELF file (ldd).

Each file is mapped to the package that owns it (dpkg's own file lists, /var/lib/dpkg/info/*.list,
which is what `dpkg -S` reads; paths are also tried through symlinks and usr-merge aliases). The
allowed set is setup.sh's list (`bash scripts/setup.sh --list`) closed under Depends and
Pre-Depends (not Recommends: setup installs with --no-install-recommends), plus Essential
packages, which every Debian system has. A file owned by no package (installed by hand, e.g.
under /usr/local) fails too. The output names every offending package and one file that needed it.

Self-test: `--drop PKG` removes PKG from setup's list and succeeds only if the guard then reports
PKG missing (so the guard can fail, and does so for the package that broke the fresh machine).
"""
import argparse
import os
import re
import subprocess
import sys


def setup_packages(setup_sh):
    out = subprocess.run(["bash", setup_sh, "--list"], check=True, capture_output=True, text=True).stdout
    return [p for p in out.split() if p]


def installed_status():
    """name -> (depends atoms, provides, essential) for every installed package."""
    fmt = "${Package}\t${Status}\t${Essential}\t${Pre-Depends}\t${Depends}\t${Provides}\n"
    out = subprocess.run(["dpkg-query", "-W", "-f", fmt], check=True, capture_output=True, text=True).stdout
    pkgs = {}
    for line in out.splitlines():
        name, status, essential, predeps, deps, provides = (line.split("\t") + [""] * 6)[:6]
        if not status.endswith(" installed"):
            continue
        pkgs[name] = (parse_deps(predeps) + parse_deps(deps), [a[0] for a in parse_deps(provides)], essential == "yes")
    return pkgs


def parse_deps(text):
    """'a (>= 1) | b, c:any' -> [['a', 'b'], ['c']] (alternatives per dependency)."""
    result = []
    for dep in text.split(","):
        alts = []
        for alt in dep.split("|"):
            name = re.sub(r"\(.*?\)|\[.*?\]|<.*?>", "", alt).strip().split(":")[0]
            if name:
                alts.append(name)
        if alts:
            result.append(alts)
    return result


def dependency_closure(roots, pkgs):
    providers = {}
    for name, (_, provides, _) in pkgs.items():
        for v in provides:
            providers.setdefault(v, []).append(name)
    seen, stack = set(), []
    for r in roots:  # a listed name may be virtual (provided by a real package)
        stack += ([r] if r in pkgs else []) + providers.get(r, [])
    while stack:
        p = stack.pop()
        if p in seen:
            continue
        seen.add(p)
        for alts in pkgs[p][0]:
            # Every installed alternative (or provider) may be the one that satisfies it.
            for a in alts:
                for cand in ([a] if a in pkgs else []) + providers.get(a, []):
                    if cand not in seen:
                        stack.append(cand)
    return seen


def file_owners():
    owners = {}
    info = "/var/lib/dpkg/info"
    for f in os.listdir(info):
        if not f.endswith(".list"):
            continue
        pkg = f[:-5].split(":")[0]
        with open(os.path.join(info, f), errors="replace") as fh:
            for line in fh:
                owners.setdefault(line.rstrip("\n"), pkg)
    return owners


USR_MERGED = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


def aliases(path):
    cands = [path, os.path.normpath(path)]
    real = os.path.realpath(path)
    cands.append(real)
    for p in list(cands):
        for d in USR_MERGED:
            if p.startswith(d + "/"):
                cands.append("/usr" + p)
            if p.startswith("/usr" + d + "/"):
                cands.append(p[4:])
    return cands


def owner_of(path, owners):
    for c in aliases(path):
        if c in owners:
            return owners[c]
    return None


def is_system(path, roots):
    return path.startswith("/") and not any(path.startswith(r) for r in roots)


def build_files(build, roots):
    files = {}  # path -> why it was used

    cache = os.path.join(build, "CMakeCache.txt")
    with open(cache, errors="replace") as fh:
        for line in fh:
            m = re.match(r"^([A-Za-z0-9_.+-]+):(PATH|FILEPATH)=(.*)$", line.rstrip("\n"))
            if not m:
                continue
            key, typ, value = m.groups()
            if not is_system(value, roots):
                continue
            # <Pkg>_DIR: the folder of the package configuration find_package() loaded; its
            # <Pkg>Config.cmake or <pkg>-config.cmake is the file that was read (the folder may
            # hold other packages' plugin configs too, which were not).
            if typ == "PATH" and key.endswith("_DIR") and not key.endswith("_INCLUDE_DIR") and os.path.isdir(value):
                pkg = key[:-4]
                for f in (pkg + "Config.cmake", pkg.lower() + "-config.cmake"):
                    if os.path.isfile(os.path.join(value, f)):
                        files.setdefault(os.path.join(value, f), "CMake package " + key)

    elves = []
    for dirpath, dirnames, filenames in os.walk(build):
        for f in filenames:
            p = os.path.join(dirpath, f)
            if f.endswith(".o.d"):
                with open(p, errors="replace") as fh:
                    text = fh.read().replace("\\\n", " ")
                for tok in text.split():
                    if tok.endswith(":"):
                        continue
                    if is_system(tok, roots) and not tok.endswith(".o"):
                        files.setdefault(tok, "header read by the compiler")
            elif f == "link.txt":
                with open(p, errors="replace") as fh:
                    for tok in fh.read().split():
                        for part in tok.split(","):  # -Wl,-rpath,... lists
                            if is_system(part, roots) and re.search(r"\.(a|so)(\.[0-9.]+)?$", part) and os.path.exists(part):
                                files.setdefault(part, "linked (link.txt)")
            elif not os.path.islink(p) and os.access(p, os.X_OK) or f.endswith(".so"):
                try:
                    with open(p, "rb") as fh:
                        if fh.read(4) == b"\x7fELF":
                            elves.append(p)
                except OSError:
                    pass
    for elf in elves:
        r = subprocess.run(["ldd", elf], capture_output=True, text=True)
        for line in r.stdout.splitlines():
            m = re.search(r"=>\s+(/\S+)", line) or re.match(r"\s*(/\S+)\s+\(", line)
            if m and is_system(m.group(1), roots):
                files.setdefault(m.group(1), "loaded by " + os.path.relpath(elf, build))
    return files


def check(build, setup_sh, drop, quiet=False):
    roots = [os.path.realpath(build) + "/", os.path.realpath(os.path.join(os.path.dirname(setup_sh), "..")) + "/",
             "/proc/", "/tmp/"]
    listed = [p for p in setup_packages(setup_sh) if p not in drop]
    pkgs = installed_status()
    allowed = dependency_closure(listed, pkgs) | {p for p, v in pkgs.items() if v[2]}
    owners = file_owners()
    files = build_files(build, roots)
    missing, unowned = {}, {}
    for path, why in sorted(files.items()):
        pkg = owner_of(path, owners)
        if pkg is None:
            unowned[path] = why
        elif pkg not in allowed:
            missing.setdefault(pkg, (path, why))
    if not quiet:
        print(f"package guard: {len(files)} system files used by the build, {len(listed)} packages in setup.sh, "
              f"{len(allowed)} allowed with Depends and Essential")
    return missing, unowned


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("--setup", required=True)
    ap.add_argument("--drop", action="append", default=[],
                    help="self-test: remove this package from setup's list and expect it reported")
    a = ap.parse_args()
    missing, unowned = check(a.build, a.setup, set(a.drop), quiet=bool(a.drop))
    if a.drop:
        not_found = [p for p in a.drop if p not in missing]
        if not_found:
            print("package guard self-test FAILED: without " + ", ".join(not_found) +
                  " in setup.sh the guard did not report it (is it used by this build?)")
            return 1
        print("package guard self-test: without " + ", ".join(a.drop) + " the guard reports it missing, e.g. "
              + "; ".join(f"{p}: {missing[p][0]}" for p in a.drop))
        return 0
    ok = True
    if missing:
        ok = False
        print("FAIL: the build used files of packages that scripts/setup.sh does not install "
              "(neither listed nor pulled in by the listed packages' Depends):")
        for pkg, (path, why) in sorted(missing.items()):
            print(f"  {pkg}: {path} ({why})")
        print("Add them to scripts/setup.sh, or a fresh Debian 12 will fail to build.")
    if unowned:
        ok = False
        print("FAIL: the build used system files that no Debian package owns (installed by hand?):")
        for path, why in sorted(unowned.items())[:50]:
            print(f"  {path} ({why})")
        if len(unowned) > 50:
            print(f"  ... and {len(unowned) - 50} more")
    if ok:
        print("package guard: every system file the build used comes from setup.sh's packages or their Depends")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
