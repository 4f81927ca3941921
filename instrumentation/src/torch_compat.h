// The one place where the two PyTorch C++ APIs the runtime builds against differ.
//
// The runtime builds against Debian's LibTorch 1.13 (CPU, gloo: the default build) and against
// pip's PyTorch 2.x (CUDA, NCCL, CUPTI: what GPU users have). In 1.13 ProcessGroupGloo and
// ProcessGroupNCCL derive from c10d::ProcessGroup; from 2.0 on a ProcessGroup is a dispatcher that
// holds one c10d::Backend per device type, and ProcessGroupGloo/ProcessGroupNCCL are Backends.
// The runtime needs only what both expose the same way (allreduce, broadcast, send, recv,
// barrier, each returning a c10d::Work), so it names the type it holds CommGroup and uses the
// backend directly: no dispatcher, nothing registered with torch.distributed's Python side.
// Everything else the runtime uses (stores, Work, options, tensors, autograd hooks) has the
// same spelling in both.
#pragma once

#include <torch/version.h>

#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif

namespace lockstep::rt {

#if TORCH_VERSION_MAJOR >= 2
using CommGroup = c10d::Backend;
#else
using CommGroup = c10d::ProcessGroup;
#endif

} // namespace lockstep::rt
