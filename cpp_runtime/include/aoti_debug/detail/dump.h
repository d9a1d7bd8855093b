// Level-10 flight recorder of the C++ shim (docs/dumps.md).
//
// Per model run, a folder <AOTI_DEBUG_DUMP_DIR>/<pid>-<model>-run<R>/ with
// the run's inputs (inputs.pt), each launch's in/inout tensors written before
// the launch and out/inout tensors after it, and manifest.jsonl (one line per
// event).  Tensor files are written in torch.save's zip format by hand
// (standard library only): an uncompressed ZIP holding archive/data.pkl
// (pickle protocol 2 calling torch._utils._rebuild_tensor_v2), the raw bytes
// in archive/data/<key>, archive/version and archive/byteorder, so
// torch.load(path, weights_only=True) reads them.
//
// A tensor file holds the smallest storage that covers the view (so an
// expanded tensor keeps its zero strides and stays small); shape, strides
// and dtype are kept, the storage offset is not (it is 0 in the file).
//
// Folders and files are created exclusively, never through a link, and the
// limits (AOTI_DEBUG_DUMP_MAX_COUNT launches, AOTI_DEBUG_DUMP_MAX_SIZE_GB
// bytes in the dump directory, manifest lines included) are hard and hold
// for every process writing into the directory (dumpdir.h).  Reaching one,
// or a folder/file that cannot be written, writes one note and stops the
// recorder for the process (the stop flag lives in the process registry,
// shared by every copy of the runtime); logging goes on at level 5.
#pragma once

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "../config.h"
#include "dumpdir.h"
#include "format.h"
#include "registry.h"
#include "sha256.h"

AOTI_DEBUG_NAMESPACE_BEGIN
namespace detail {
// The recorder and the helpers behind it are in dump-inl.h: a wrapper linked
// with the core object (config.h) parses none of them.
class Recorder;

// Where this artifact's code lives (the model .so), for replay.
AOTI_DEBUG_CORE_DECL std::string artifact_path();

}  // namespace detail
AOTI_DEBUG_NAMESPACE_END

#if AOTI_DEBUG_CORE_BODIES
#include "dump-inl.h"
#endif
