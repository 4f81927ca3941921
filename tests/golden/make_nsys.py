"""Writes a small 2-rank Nsight Systems SQLite export pair (the tables and columns of
`nsys export --type sqlite` that Lockstep reads, as tests/import/trace_writer.h lists them) with
a layout derived by hand, for the diff tests: deterministic, no GPU needed.

Usage: make_nsys.py OUT_DIR   -> OUT_DIR/nsys-rank0.sqlite, OUT_DIR/nsys-rank1.sqlite

Per rank r, three steps s = 0, 1, 2 (NVTX "ProfilerStep#10+s"), each 2 ms long starting at
s * 2 ms (times in µs of the step; rank 1's backward is 0.2 ms longer, so rank 1 is late):
  forward kernel 0-400, backward kernels 450-900 and 950-1400 (1600 on rank 1),
  ncclDevKernel_AllReduce on stream 2 launched at 1000 (1200 on rank 1), ending at 1800 on both
  (rank 0 waits for rank 1), a 1 MiB HtoD copy 1650-1700, the optimizer kernel 1800-1900.
Hand-derived, per rank: compute 1.4 / 1.6 ms, communication 0.8 / 0.6 ms, of which hidden
behind compute 0.4 / 0.4 ms.
Every device row is launched by a runtime call 10 µs before it (correlation ids).
"""
import os
import sqlite3
import sys

SESSION_NS = 1_700_000_000_000_000_000


def write(path, rank):
    if os.path.exists(path):
        os.remove(path)
    db = sqlite3.connect(path)
    db.executescript("""
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
  demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, gridX INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, bytes INTEGER NOT NULL,
  copyKind INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, value INTEGER,
  bytes INTEGER NOT NULL);
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER,
  category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER,
  domainId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER,
  globalTid INTEGER, correlationId INTEGER, nameId INTEGER, returnValue INTEGER);
CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT);
""")
    db.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (?, '', '')", (SESSION_NS,))
    tid = ((4242 + rank) << 24) | (4242 + rank)
    names = {}

    def name(text):
        if text not in names:
            names[text] = len(names) + 1
            db.execute("INSERT INTO StringIds VALUES (?, ?)", (names[text], text))
        return names[text]

    corr = [0]

    def launch(start_ns):
        corr[0] += 1
        db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, 1, ?, ?, 0, 0)",
                   (start_ns - 10_000, start_ns - 5_000, tid, corr[0]))
        return corr[0]

    def kernel(a_us, b_us, stream, text):
        a, b = a_us * 1000, b_us * 1000
        c = launch(a)
        n = name(text)
        db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, 0, 1, ?, ?, 0, ?, ?, 1)", (a, b, stream, c, n, n))

    late = 200 if rank == 1 else 0
    for s in range(3):
        t0 = s * 2000 + 100
        db.execute("INSERT INTO NVTX_EVENTS VALUES (?, ?, 59, 0, 0, 0, ?, ?, ?, NULL, 0)",
                   ((t0 - 50) * 1000, (t0 + 1950) * 1000, f"ProfilerStep#{10 + s}", tid, tid))
        kernel(t0 + 0, t0 + 400, 7, "void forward_gemm_kernel<float>(float const*, float*)")
        kernel(t0 + 450, t0 + 900, 7, "void backward_gemm_kernel<float>(float const*, float*)")
        kernel(t0 + 950, t0 + 1400 + late, 7, "void backward_gemm_kernel<float>(float const*, float*)")
        kernel(t0 + 1000 + late, t0 + 1800, 2, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)")
        c = launch((t0 + 1650) * 1000)
        db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?, ?, 0, 1, 7, ?, 0, ?, 1)",
                   ((t0 + 1650) * 1000, (t0 + 1700) * 1000, c, 1 << 20))
        kernel(t0 + 1800, t0 + 1900, 7, "void sgd_update_kernel<float>(float*, float const*)")
    db.commit()
    db.close()


if __name__ == "__main__":
    out = sys.argv[1]
    for r in range(2):
        write(os.path.join(out, f"nsys-rank{r}.sqlite"), r)
