// aoti-debug-run: run an AOT Inductor package (.pt2) from C++, the way a C++
// server does, on inputs saved from Python.
//
//   aoti-debug-run PACKAGE.pt2 --inputs FILE [--outputs FILE]
//                  [--model-name NAME] [--repeat N] [--library LIB.so ...]
//
// PACKAGE.pt2 may also be a directory the package was unzipped into.
// --library loads a shared library (repeatable) before the package: the
// custom ops the model calls through the proxy executor register themselves
// in the dispatcher when their library is loaded, as in a server that links
// or dlopens them.  A name without a '/' that is a file in the current
// directory is that file (dlopen alone would search the system's library
// path for it); other names without a '/' are searched for as dlopen does.
//
// Files (docs/cpp.md): inputs are torch.save(list_of_tensors) — what
// aoti_debug.runner.save_inputs writes; outputs are a tuple of tensors in the
// same zip format, readable with plain torch.load(path).
//
// Exit status: 0 ran; 1 the package failed to load, the model failed to run
// or the outputs could not be written; 2 bad arguments or unreadable input
// files.  Every failure is one line on stderr:
//   aoti-debug-run: <what failed>: <message>
// A reader of stdout that goes away (`| head -1`) does not stop the run: the
// outputs are still written and the status is that of the run.

#include <aoti_debug/config.h>

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/serialize.h>
#include <torch/torch.h>

#include <dlfcn.h>
#include <elf.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr int kOk = 0;
constexpr int kFailed = 1;
constexpr int kUsage = 2;

const char* const kUsageLine =
    "usage: aoti-debug-run PACKAGE.pt2 --inputs FILE [--outputs FILE] "
    "[--model-name NAME] [--repeat N] [--library LIB.so ...]";

const char* const kHelp =
    "Runs an AOT Inductor package (a .pt2 file or the directory it was unpacked into) the way\n"
    "a C++ server does, on inputs written by aoti_debug.runner.save_inputs.\n"
    "  --inputs FILE      the inputs (torch.save of a list or tuple of tensors)\n"
    "  --outputs FILE     write the outputs there (a tuple of tensors, for torch.load)\n"
    "  --model-name NAME  the model in the package (default: model)\n"
    "  --repeat N         run N times (default: 1) and print the time per run\n"
    "  --library LIB.so   load a library first, e.g. one that registers custom ops\n"
    "                     (repeatable); a name without '/' that is a file in the current\n"
    "                     directory is loaded as that file, other names without '/' are\n"
    "                     searched for on the system's library path, as dlopen does\n"
    "exit status: 0 ran, 1 the package or the run failed, 2 bad arguments or input files\n";

// Carries the exit status with the one-line message.
struct Failure {
  int status;
  std::string what;     // which step failed
  std::string message;  // why, verbatim where it came from an exception
};

Failure usage(const std::string& message) {
  return {kUsage, "bad arguments", message};
}

struct Options {
  std::string package;
  std::string inputs;
  std::string outputs;
  std::string model_name = "model";
  long repeat = 1;
  std::vector<std::string> libraries;
};

// Accepts "--opt VALUE" and "--opt=VALUE", in any order around PACKAGE.
Options parse_args(int argc, char** argv) {
  Options opt;
  bool have_package = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::cout << kUsageLine << "\n\n" << kHelp;
      std::exit(kOk);
    }
    if (arg.rfind("--", 0) != 0 || arg == "--") {
      if (have_package) {
        throw usage("unexpected argument '" + arg + "' (only one PACKAGE.pt2 is accepted)");
      }
      opt.package = arg;
      have_package = true;
      continue;
    }
    std::string name = arg, value;
    bool inline_value = false;
    auto eq = arg.find('=');
    if (eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      inline_value = true;
    }
    if (name != "--inputs" && name != "--outputs" && name != "--model-name" &&
        name != "--repeat" && name != "--library") {
      throw usage("unknown option '" + name +
                  "' (accepted: --inputs FILE, --outputs FILE, --model-name NAME, --repeat N, "
                  "--library LIB.so)");
    }
    if (!inline_value) {
      if (i + 1 >= argc) throw usage(name + " needs a value");
      value = argv[++i];
    }
    if (value.empty()) throw usage(name + " needs a non-empty value");
    if (name == "--inputs") {
      opt.inputs = value;
    } else if (name == "--outputs") {
      opt.outputs = value;
    } else if (name == "--model-name") {
      opt.model_name = value;
    } else if (name == "--library") {
      opt.libraries.push_back(value);
    } else {
      char* end = nullptr;
      errno = 0;
      long n = std::strtol(value.c_str(), &end, 10);
      if (errno != 0 || *end != '\0' || n < 1) {
        throw usage("--repeat needs a whole number >= 1, got '" + value + "'");
      }
      opt.repeat = n;
    }
  }
  if (!have_package) throw usage("missing PACKAGE.pt2 (" + std::string(kUsageLine) + ")");
  if (opt.inputs.empty()) throw usage("missing --inputs FILE (" + std::string(kUsageLine) + ")");
  return opt;
}

// The message of an exception as its thrower wrote it: c10::Error's what()
// may carry a C++ backtrace after the message, which is not part of it.  An
// error from inside the model (an ATen op called through the C shim) reaches
// us as a message that already holds the op's what(), backtrace included:
// that is cut at c10's "Exception raised from ... (most recent call first):"
// line.  Trailing newlines (AOTI's own checks end their messages with one)
// are dropped so that our line stays one line; the text itself is kept
// verbatim.
std::string message_of(const std::exception& e) {
  auto* c10_error = dynamic_cast<const c10::Error*>(&e);
  std::string text = c10_error ? c10_error->what_without_backtrace() : e.what();
  const std::string head = "\nException raised from ", tail = " (most recent call first):";
  for (size_t at = text.find(head); at != std::string::npos; at = text.find(head, at + 1)) {
    const size_t eol = std::min(text.find('\n', at + 1), text.size());
    if (eol - at > tail.size() && text.compare(eol - tail.size(), tail.size(), tail) == 0) {
      text.resize(at);
      break;
    }
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

// The name dlopen is given for --library `lib`: dlopen searches the system's
// library path for a name without a '/', so a file of that name in the
// current directory is named by its path instead.
std::string library_path(const std::string& lib) {
  struct stat st;
  if (lib.find('/') == std::string::npos && stat(lib.c_str(), &st) == 0) return "./" + lib;
  return lib;
}

// What a path is, where it is not a regular file or a folder: opening a FIFO
// would wait for a writer forever.
const char* special_kind(const struct stat& st) {
  if (S_ISFIFO(st.st_mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  if (S_ISCHR(st.st_mode)) return "a character device";
  if (S_ISBLK(st.st_mode)) return "a block device";
  return S_ISREG(st.st_mode) || S_ISDIR(st.st_mode) ? nullptr : "not a regular file";
}

// Names what is wrong with a path the user gave, or returns "" when it can be
// opened for reading; `expected` says what it should be.  Looked at before it
// is opened.
std::string unreadable(const std::string& path, const std::string& expected) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0) {
    if (const char* kind = special_kind(st)) return "'" + path + "' is " + kind + ", expected " + expected;
  }
  errno = 0;
  std::ifstream f(path, std::ios::binary);
  if (!f) return "'" + path + "': " + (errno ? std::strerror(errno) : "cannot be opened");
  return "";
}

// Why a shared object of `n` bytes cannot be loaded without reading past its
// end (a package cut short: dlopen would map it and die of SIGBUS), or "".
std::string elf_problem(const unsigned char* d, uint64_t n) {
  if (n < sizeof(Elf64_Ehdr) || std::memcmp(d, ELFMAG, SELFMAG) != 0)
    return "is not an ELF shared object (" + std::to_string(n) + " bytes)";
  if (d[EI_CLASS] != ELFCLASS64) return "is not a 64-bit ELF shared object";
  Elf64_Ehdr h;
  std::memcpy(&h, d, sizeof h);
  const auto within = [n](uint64_t off, uint64_t size) { return off <= n && size <= n - off; };
  const std::string have = ", the file has " + std::to_string(n) + " bytes: it was cut short";
  if (h.e_phentsize != sizeof(Elf64_Phdr) ||
      !within(h.e_phoff, static_cast<uint64_t>(h.e_phnum) * sizeof(Elf64_Phdr)))
    return "has its program headers past its end" + have;
  for (uint64_t i = 0; i < h.e_phnum; ++i) {
    Elf64_Phdr ph;
    std::memcpy(&ph, d + h.e_phoff + i * sizeof ph, sizeof ph);
    if (!within(ph.p_offset, ph.p_filesz))
      return "has segment " + std::to_string(i) + " ending at byte " + std::to_string(ph.p_offset + ph.p_filesz) +
             have;
  }
  if (h.e_shnum != 0 && !within(h.e_shoff, static_cast<uint64_t>(h.e_shnum) * h.e_shentsize))
    return "has its section headers past its end" + have;
  return "";
}

// The first compiled model (.so) in a package, or in the folder it was
// unpacked into, that could not be loaded safely, named with why; "" when
// every one can (or the package is no archive: the loader says so).
std::string cut_short_library(const std::string& package, bool folder) {
  if (folder) {
    std::error_code ec;
    for (std::filesystem::recursive_directory_iterator it(package, ec), end; !ec && it != end; it.increment(ec)) {
      if (!it->is_regular_file(ec) || it->path().extension() != ".so") continue;
      std::ifstream f(it->path(), std::ios::binary);
      std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      const std::string why = elf_problem(bytes.data(), bytes.size());
      if (!why.empty()) return "'" + it->path().string() + "' " + why;
    }
    return "";
  }
  try {
    caffe2::serialize::PyTorchStreamReader reader(package);
    for (const std::string& name : reader.getAllRecords()) {
      if (name.size() < 3 || name.compare(name.size() - 3, 3, ".so") != 0) continue;
      auto [data, size] = reader.getRecord(name);
      const std::string why = elf_problem(static_cast<const unsigned char*>(data.get()), size);
      if (!why.empty()) return "'" + package + "': its " + name + " " + why;
    }
  } catch (const std::exception&) {
  }
  return "";
}

std::vector<at::Tensor> read_inputs(const std::string& path) {
  std::string why = unreadable(path, "a file written by aoti_debug.runner.save_inputs");
  if (why.empty() && std::filesystem::is_directory(path)) {
    why = "'" + path + "' is a directory, expected a file written by aoti_debug.runner.save_inputs";
  }
  if (!why.empty()) throw Failure{kUsage, "cannot read inputs", why};
  std::ifstream f(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  c10::IValue value;
  try {
    value = torch::pickle_load(bytes);
  } catch (const std::exception& e) {
    throw Failure{kUsage, "cannot read inputs",
                  "'" + path + "' is not a file written by torch.save / "
                  "aoti_debug.runner.save_inputs (" + message_of(e) + ")"};
  }
  std::vector<c10::IValue> items;
  if (value.isList()) {
    items = value.toListRef().vec();
  } else if (value.isTuple()) {
    items = value.toTupleRef().elements().vec();
  } else if (value.isTensor()) {
    items.push_back(value);
  } else {
    throw Failure{kUsage, "cannot read inputs",
                  "'" + path + "' holds a value of type " + value.tagKind() +
                      ", expected a list or tuple of tensors"};
  }
  std::vector<at::Tensor> tensors;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].isTensor()) {
      throw Failure{kUsage, "cannot read inputs",
                    "'" + path + "': item " + std::to_string(i) + " has type " +
                        items[i].tagKind() + ", expected a tensor"};
    }
    tensors.push_back(items[i].toTensor());
  }
  return tensors;
}

void write_outputs(const std::string& path, const std::vector<at::Tensor>& outputs) {
  std::vector<c10::IValue> items;
  for (const auto& t : outputs) {
    items.emplace_back(t.defined() ? c10::IValue(t.cpu()) : c10::IValue());
  }
  // A tuple, not a list: libtorch tags a pickled tensor list with a global
  // that torch.load(weights_only=True) refuses; a tuple loads everywhere.
  std::vector<char> bytes = torch::pickle_save(c10::ivalue::Tuple::create(std::move(items)));
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (f) f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (f) f.close();
  if (!f) {
    throw Failure{kFailed, "cannot write outputs", "'" + path + "': " + std::strerror(errno)};
  }
}

std::string python_dtype(c10::ScalarType t) {
  return "torch." + std::string(c10::getDtypeNames(t).first);
}

std::string python_shape(const at::Tensor& t) {
  std::ostringstream s;
  s << "(";
  for (int64_t d = 0; d < t.dim(); ++d) s << (d ? ", " : "") << t.size(d);
  if (t.dim() == 1) s << ",";
  s << ")";
  return s.str();
}

// One line per output: enough to see at a glance that a run produced sane
// values; exact comparison goes through --outputs.
std::string summary(size_t index, const at::Tensor& t) {
  std::ostringstream s;
  s << "output " << index << ": ";
  if (!t.defined()) {
    s << "None";
    return s.str();
  }
  s << "shape=" << python_shape(t) << " dtype=" << python_dtype(t.scalar_type())
    << " device=" << t.device();
  at::Tensor cpu = t.cpu();
  char buf[64];
  if (cpu.is_complex()) {
    // no single number summarises complex values well; shape/dtype suffice
  } else if (cpu.is_floating_point()) {
    at::Tensor d = cpu.to(at::kDouble);
    std::snprintf(buf, sizeof buf, "%.9g", d.sum().item<double>());
    s << " sum=" << buf << " nan=" << d.isnan().sum().item<int64_t>();
  } else {
    std::snprintf(buf, sizeof buf, "%" PRId64, cpu.to(at::kLong).sum().item<int64_t>());
    s << " sum=" << buf;
  }
  return s.str();
}

int run(const Options& opt) {
  // A package is a .pt2 file or a directory it was unpacked into.
  const bool folder = std::filesystem::is_directory(opt.package);
  if (!folder) {
    std::string why = unreadable(opt.package, "a .pt2 file or a folder it was unpacked into");
    if (!why.empty()) throw Failure{kUsage, "cannot read package", why};
  }
  const std::string cut = cut_short_library(opt.package, folder);
  if (!cut.empty()) throw Failure{kUsage, "cannot read package", cut};
  std::vector<at::Tensor> inputs = read_inputs(opt.inputs);
  for (const std::string& lib : opt.libraries) {
    // RTLD_GLOBAL: an op library may export symbols other libraries use.
    if (dlopen(library_path(lib).c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr) {
      const char* why = dlerror();
      throw Failure{kUsage, "cannot load library", why ? why : ("'" + lib + "'")};
    }
  }

  std::unique_ptr<torch::inductor::AOTIModelPackageLoader> loader;
  std::string device_key;
  try {
    loader = std::make_unique<torch::inductor::AOTIModelPackageLoader>(opt.package, opt.model_name);
    auto metadata = loader->get_metadata();
    auto it = metadata.find("AOTI_DEVICE_KEY");
    if (it != metadata.end()) device_key = it->second;
  } catch (const std::exception& e) {
    throw Failure{kFailed, "cannot load package '" + opt.package + "'", message_of(e)};
  }

  // Inputs are saved on the CPU; the model runs where it was compiled for.
  if (!device_key.empty() && device_key != "cpu") {
    try {
      c10::Device device(device_key);
      for (auto& t : inputs) t = t.to(device);
    } catch (const std::exception& e) {
      throw Failure{kFailed, "cannot move inputs to device '" + device_key + "'", message_of(e)};
    }
  }

  std::vector<at::Tensor> outputs;
  double total_ms = 0.0;
  for (long i = 0; i < opt.repeat; ++i) {
    auto start = std::chrono::steady_clock::now();
    try {
      outputs = loader->run(inputs);
    } catch (const std::exception& e) {
      throw Failure{kFailed, "model run failed", message_of(e)};
    }
    total_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }

  for (size_t i = 0; i < outputs.size(); ++i) std::cout << summary(i, outputs[i]) << "\n";
  char buf[128];
  std::snprintf(buf, sizeof buf, "ran %ld time%s, %.3f ms per run", opt.repeat,
                opt.repeat == 1 ? "" : "s", total_ms / static_cast<double>(opt.repeat));
  std::cout << buf << "\n";
  if (!opt.outputs.empty()) {
    write_outputs(opt.outputs, outputs);
    std::cout << "outputs written to " << opt.outputs << "\n";
  }
  std::cout.flush();
  return kOk;
}

}  // namespace

int main(int argc, char** argv) {
  // A closed stdout (`| head -1`) fails our writes instead of killing the run
  // before the outputs are written; the log's writes guard themselves.
  signal(SIGPIPE, SIG_IGN);
  try {
    return run(parse_args(argc, argv));
  } catch (const Failure& f) {
    std::cout.flush();
    std::cerr << "aoti-debug-run: " << f.what << ": " << f.message << std::endl;
    return f.status;
  } catch (const std::exception& e) {
    std::cout.flush();
    std::cerr << "aoti-debug-run: unexpected error: " << message_of(e) << std::endl;
    return kFailed;
  }
}
