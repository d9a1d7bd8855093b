// One logged model call replayed through the C++ runtime's record path, for
// bench/bench_records.py (which writes CALL from a level-5 log and builds this).
//
//   replay_records CALL N MODE
//
// MODE records: the call's run, launch, launch-end and run-end records at
// level 5 (before_launch / after_launch / run_begin / end_run, as a wrapper
// calls them) to AOTI_DEBUG_LOGDEST; stats: compute_stats(v, true) over every
// Tensor block those records hold (the level-5 floor's statistics pass);
// writes: as many write(2) calls of the records' mean size into
// AOTI_DEBUG_LOGDEST (the write floor).  N calls; prints the median ns of one.
// The log is emptied every 20 calls, outside the timing, as bench_corpus's
// driver does.
//
// CALL, one item a line: "T dtype ndim size... stride..." (a tensor, numbered
// from 0 in order); "S kernel nodes source module lines" (a launch site,
// strings hex-encoded, "-" for empty) followed by "A n" and n lines
// "name role tensor" (role 0 in, 1 out, 2 inout); "R n" / "E n" and n lines
// "name tensor" (the run's inputs / outputs); "W records bytes".
//
// Header-only (config.h's default), like stats_floor.cpp.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "aoti_debug/launch.h"

namespace ad = aoti_debug;

namespace {

struct Tensor {
  int32_t dtype = 0;
  std::vector<int64_t> sizes, strides;
  std::vector<unsigned char> storage;
  ad::TensorView view{};
};

struct Launch {
  ad::Site site{};
  std::vector<ad::ArgSpec> specs;
  std::vector<int> tensors;
};

struct Named {
  std::vector<const char*> names;
  std::vector<int> tensors;
};

std::deque<std::string> strings;  // what the sites and names point to

const char* keep(std::string s) {
  strings.push_back(std::move(s));
  return strings.back().c_str();
}

std::string unhex(const std::string& h) {
  if (h == "-") return "";
  std::string s;
  for (size_t i = 0; i + 1 < h.size(); i += 2) s += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
  return s;
}

int itemsize(int32_t dtype) {
  switch (dtype) {
    case 0: case 1: case 11: return 1;  // uint8, int8, bool
    case 2: case 5: case 15: return 2;  // int16, float16, bfloat16
    case 3: case 6: return 4;           // int32, float32
    default: return 8;
  }
}

// Finite values of the tensor's dtype across its span (the floor's kind of data).
void fill(Tensor& t) {
  int64_t lo = 0, hi = 0;
  for (size_t d = 0; d < t.sizes.size(); ++d) {
    const int64_t reach = (t.sizes[d] - 1) * t.strides[d];
    (reach < 0 ? lo : hi) += reach;
  }
  const int size = itemsize(t.dtype);
  const int64_t span = hi - lo + 1;
  t.storage.assign(static_cast<size_t>(span * size + 64), 0);
  for (int64_t e = 0; e < span; ++e) {
    unsigned char* p = t.storage.data() + e * size;
    const int64_t k = e * 7919 % 1000 - 500;
    if (t.dtype == 6) {
      const float f = static_cast<float>(k) / 7000.0f;
      std::memcpy(p, &f, 4);
    } else if (t.dtype == 7) {
      const double f = static_cast<double>(k) / 7000.0;
      std::memcpy(p, &f, 8);
    } else if (size == 8) {
      const int64_t v = e % 128;
      std::memcpy(p, &v, 8);
    } else if (size == 4) {
      const int32_t v = static_cast<int32_t>(e % 128);
      std::memcpy(p, &v, 4);
    } else {
      p[0] = static_cast<unsigned char>(e % 2);  // 0/1: valid for bool, small for the rest
    }
  }
  t.view = ad::TensorView{t.storage.data() - lo * size, t.dtype, static_cast<int64_t>(t.sizes.size()),
                          t.sizes.data(), t.strides.data(), 0, -1};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: replay_records CALL N records|stats|writes\n");
    return 2;
  }
  std::ifstream in(argv[1]);
  std::deque<Tensor> tensors;
  std::deque<Launch> launches;
  Named run_in, run_out;
  int records = 0;
  long bytes = 0;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string tag;
    f >> tag;
    if (tag == "T") {
      Tensor t;
      int nd = 0;
      f >> t.dtype >> nd;
      t.sizes.resize(nd), t.strides.resize(nd);
      for (auto& x : t.sizes) f >> x;
      for (auto& x : t.strides) f >> x;
      tensors.push_back(std::move(t));
      fill(tensors.back());
    } else if (tag == "S") {
      std::string k, n, s, m, l;
      f >> k >> n >> s >> m >> l;
      launches.emplace_back();
      Launch& L = launches.back();
      L.site.kernel = keep(unhex(k)), L.site.nodes = keep(unhex(n)), L.site.source = keep(unhex(s));
      L.site.module = keep(unhex(m)), L.site.lines = keep(unhex(l));
    } else if (tag == "A") {
      Launch& L = launches.back();
      int n = 0;
      f >> n;
      for (int i = 0; i < n && std::getline(in, line); ++i) {
        std::istringstream a(line);
        std::string name;
        int role = 0, t = 0;
        a >> name >> role >> t;
        L.specs.push_back(ad::ArgSpec{keep(name), static_cast<ad::Role>(role)});
        L.tensors.push_back(t);
      }
      L.site.args = L.specs.data(), L.site.nargs = n;
    } else if (tag == "R" || tag == "E") {
      Named& into = tag == "R" ? run_in : run_out;
      int n = 0;
      f >> n;
      for (int i = 0; i < n && std::getline(in, line); ++i) {
        std::istringstream a(line);
        std::string name;
        int t = 0;
        a >> name >> t;
        into.names.push_back(keep(name)), into.tensors.push_back(t);
      }
    } else if (tag == "W") {
      f >> records >> bytes;
    }
  }

  static ad::Model model(ad::ModelConfig{"model", 5, "", "off", false, "replay"});
  std::vector<ad::Value> vals(64);
  auto values = [&](const std::vector<int>& idx) {
    if (vals.size() < idx.size()) vals.resize(idx.size());
    for (size_t j = 0; j < idx.size(); ++j) vals[j] = ad::Value(tensors[static_cast<size_t>(idx[j])].view);
    return ad::Values::of(vals.data(), idx.size());
  };
  const long n = std::atol(argv[2]);
  const std::string mode = argv[3];
  const char* dest = std::getenv("AOTI_DEBUG_LOGDEST");
  const int wfd = mode == "writes" && dest ? ::open(dest, O_WRONLY | O_APPEND | O_CREAT | O_TRUNC, 0600) : -1;
  const size_t size = records > 0 ? static_cast<size_t>(bytes / records) : 1;
  std::vector<char> text(size, 'x');
  volatile uint64_t sink = 0;
  std::vector<double> per;
  for (long r = 0; r < n; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    if (mode == "records") {
      ad::Run run = model.begin_run();
      ad::run_begin(run, run_in.names.data(), values(run_in.tensors));
      for (const Launch& L : launches) {
        ++run.launch;
        ad::before_launch(run, L.site, values(L.tensors));
        sink = sink + 1;  // stands for the kernel
        ad::after_launch(run, L.site, values(L.tensors));
      }
      ad::end_run(run, run_out.names.data(), values(run_out.tensors));
    } else if (mode == "stats") {
      auto pass = [&](int t) { sink = sink + ad::compute_stats(tensors[static_cast<size_t>(t)].view, true).hash; };
      for (int t : run_in.tensors) pass(t);
      for (const Launch& L : launches)
        for (int side = 0; side < 2; ++side)
          for (int j = 0; j < L.site.nargs; ++j) {
            const ad::Role role = L.specs[static_cast<size_t>(j)].role;
            if (role == ad::Role::InOut || (role == ad::Role::Out) == (side == 1)) pass(L.tensors[static_cast<size_t>(j)]);
          }
      for (int t : run_out.tensors) pass(t);
    } else if (mode == "writes") {
      for (int k = 0; k < records; ++k)
        if (::write(wfd, text.data(), size) != static_cast<ssize_t>(size)) return 1;
    } else {
      std::fprintf(stderr, "replay_records: MODE is records, stats or writes, not %s\n", mode.c_str());
      return 2;
    }
    const auto t1 = std::chrono::steady_clock::now();
    per.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
    if (r % 20 == 19 && dest != nullptr && mode != "stats") (void)::truncate(dest, 0);
  }
  std::sort(per.begin(), per.end());
  std::printf("%.0f\n", per[per.size() / 2]);
  return 0;
}
