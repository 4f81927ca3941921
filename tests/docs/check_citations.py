"""Every file the code and the documents cite exists in the repository.

Scans the project's own text (sources, scripts, CMake files, Markdown) for
  - any Markdown file named (`docs/design.md`, `README.md`, ...): it must exist,
    relative to the repository root or to the citing file's folder;
  - paths into the project's top-level folders (`scripts/gpu_build.sh`, `core/whatif.h`, ...): they must exist at the root, or for a header as the include path it
    is (`<part>/include/lockstep/core/whatif.h`).
Prints each dangling citation with the file and line that makes it; exits 1 if there is one.
Usage: check_citations.py [REPO_ROOT]
"""
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))
TOP = ("docs", "scripts", "tests", "bench", "core", "ui", "app", "job", "python", "instrumentation", "resources")
TEXT = (".cpp", ".h", ".py", ".sh", ".md", ".txt", ".cmake", ".json", ".qrc", "CMakeLists.txt", "run")
SKIP_DIRS = {".git", "data", "expected", "screenshots", "__pycache__"}
MD = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.md)\b")
PATH = re.compile(r"(?<![\w/.-])((?:%s)/[\w./-]+\.(?:py|sh|cpp|h|md|json|txt))\b" % "|".join(TOP))


def files():
    for folder, dirs, names in os.walk(ROOT):
        rel = os.path.relpath(folder, ROOT)
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith("build") and not (rel == "." and d == "runs")]
        for n in names:
            if n.endswith(TEXT):
                yield os.path.join(folder, n)


def include_exists(path):
    part = path.split("/")[0]
    for top in TOP:
        candidate = os.path.join(ROOT, top, "include", "lockstep", path)
        if os.path.exists(candidate):
            return True
    for folder, dirs, _ in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith("build")]
        if folder.endswith(os.path.join("include", "lockstep")) and os.path.exists(os.path.join(folder, path)):
            return True
    return part not in TOP


def main():
    dangling = []
    cache = {}
    for f in files():
        try:
            lines = open(f, encoding="utf-8", errors="replace").read().splitlines()
        except OSError:
            continue
        here = os.path.dirname(f)
        for no, line in enumerate(lines, 1):
            for m in MD.finditer(line):
                cited = m.group(1)
                if not (os.path.exists(os.path.join(ROOT, cited)) or os.path.exists(os.path.join(here, cited))):
                    dangling.append((f, no, cited))
            for m in PATH.finditer(line):
                cited = m.group(1).rstrip(".")
                if os.path.exists(os.path.join(ROOT, cited)):
                    continue
                if cited.endswith(".h"):
                    if cited not in cache:
                        cache[cited] = include_exists(cited)
                    if cache[cited]:
                        continue
                dangling.append((f, no, cited))
    for f, no, cited in dangling:
        print(f"{os.path.relpath(f, ROOT)}:{no}: cites {cited}, which is not in the repository")
    print(f"citations: {len(dangling)} dangling" if dangling else "citations: every cited file exists")
    return 1 if dangling else 0


if __name__ == "__main__":
    sys.exit(main())
