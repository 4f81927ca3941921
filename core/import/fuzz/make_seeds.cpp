// Writes the seed corpora of the importer fuzzers: small valid Kineto traces (both forms, gzip,
// relative timestamps, comm metadata) and a small nsys-like SQLite export.
// Usage: make_seeds KINETO_DIR NSYS_DIR
#include "../../../tests/import/trace_writer.h"

#include <filesystem>
#include <string>

using namespace lockstep::testing;

int main(int argc, char** argv)
{
    if (argc != 3)
        return 2;
    const std::string k = argv[1], n = argv[2];
    std::filesystem::create_directories(k);
    std::filesystem::create_directories(n);
    const std::vector<std::string> events = {
        xEvent("user_annotation", "ProfilerStep#3", 1000, 1000, "1", "1"),
        xEvent("cpu_op", "record_param_comms", 1100, 20, "1", "1",
               "\"External id\": 12, \"Collective name\": \"allreduce\", \"In msg nelems\": 1024, \"dtype\": \"Float\""),
        xEvent("kernel", "gemm", 1100, 400, "0", "7", "\"device\": 0, \"stream\": 7, \"External id\": 11"),
        xEvent("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 1300, 400, "0", "20", "\"External id\": 12"),
        xEvent("gpu_memcpy", "Memcpy HtoD", 1600, 5, "0", "7", "\"bytes\": 64"),
        "{\"ph\": \"B\", \"name\": \"b\", \"pid\": 1, \"tid\": 2, \"ts\": 5}",
        "{\"ph\": \"E\", \"pid\": 1, \"tid\": 2, \"ts\": 9}",
        "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 1, \"tid\": 1, \"args\": {\"name\": \"main\"}}",
    };
    writeFile(k + "/object.json", objectTrace(events, "\"distributedInfo\": {\"backend\": \"nccl\", \"rank\": 1, \"world_size\": 2}"));
    writeFile(k + "/array.json", arrayTrace(events));
    writeFile(k + "/relative.json", objectTrace(events, {}, "\"baseTimeNanoseconds\": 1700000000000000000"));
    writeFile(k + "/object.json.gz", gzipBytes(objectTrace(events)));
    writeFile(k + "/legacy.json", arrayTrace({xEvent("", "gloo:all_reduce", 10.5, 3, "\"CPU functions\"", "2")}));
    {
        NsysWriter w(n + "/export.sqlite");
        w.sessionStart(1000);
        w.range(0, 1000, "ProfilerStep#1", 1);
        w.range(0, 500, "step 2", 1, true);
        w.kernel(10, 20, 0, 7, "gemm");
        w.kernel(15, 40, 0, 8, "ncclKernel_AllReduce");
        w.memcpy(50, 60, 0, 7, 128);
        w.memset(70, 71, 0, 7, 4);
    }
    return 0;
}
