"""Level 5 against its floor on one logged call, in one process, no model:

    python bench/bench_records.py LOG [--calls 3000] [--rounds 3] [--callgrind]

LOG is a level-5 log of a model (bench/data/gpt2_call.log: one call of the
corpus GPT-2, 26 launches, 121 Tensor blocks).  Its last call (from its last
`run` record on) is replayed by bench/replay_records.cpp, built header-only
at -O2: the same records through the C++ runtime's record path
(before_launch / after_launch as a wrapper calls them, the log to a file),
then the floor's two parts alone -- compute_stats(v, true) over every Tensor
block (the statistics pass) and as many write(2) calls of the records' mean
size (the write floor) -- rounds of them in turn.  Prints the medians and
records / (stats + writes), the ratio bench_corpus.py holds to 1.3 on real
models, without the model's own noise.

--callgrind counts instructions per call instead (valgrind: 200 calls less
100, so start-up cancels), of the records mode and of the statistics pass:
their difference is what a call spends outside the statistics pass in user
space (formatting, the sink; write(2)'s kernel side is not counted).
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

ROLES = {"in": 0, "out": 1, "inout": 2}


def last_call(text: str) -> str:
    starts = [m.start() for m in re.finditer(r"(?m)^\[[^\]\n]*\] \[pid \d+\] run ", text)]
    if not starts:
        raise SystemExit("bench_records: the log holds no `run` record")
    return text[starts[-1]:]


def describe(call: str) -> str:
    """The call as replay_records.cpp reads it (see there)."""
    from aoti_debug.analysis.records import parse
    from aoti_debug.native.core import DTYPE_CODES

    def hexs(s):
        return s.encode().hex() or "-"

    tensors, out = [], []

    def tensor(fields):
        sizes = [int(x) for x in fields["shape"].strip("()").split(",") if x.strip()]
        strides = [int(x) for x in fields["stride"].strip("()").split(",") if x.strip()]
        tensors.append(" ".join(map(str, ["T", DTYPE_CODES[fields["dtype"][len("torch."):]], len(sizes),
                                          *sizes, *strides])))
        return len(tensors) - 1

    def items(record):
        return [(item, t) for item in record.items for _, t in item.tensors()]

    log = parse(call)
    heads = call.split("\n[")
    launches = {}
    for r in log.records:
        if r.kind in ("run", "run-end"):
            got = [(item.name, tensor(t.fields)) for item, t in items(r)]
            out.append(f"{'R' if r.kind == 'run' else 'E'} {len(got)}")
            out += [f"{name} {t}" for name, t in got]
        elif r.kind in ("launch", "launch-end"):
            launches.setdefault(r.id, {"args": {}, "order": []})
            L = launches[r.id]
            if r.kind == "launch":
                L["record"] = r
            for item, t in items(r):
                if item.name in L["args"]:  # shown on both sides: inout
                    L["args"][item.name] = (2, L["args"][item.name][1])
                else:
                    L["args"][item.name] = (ROLES[item.role], tensor(t.fields))
                    L["order"].append(item.name)
    for head in heads:
        m = re.match(r"\[?[^\]]*\] \[pid \d+\] launch (\S+) (\S+)\n  origin: nodes=(.*) source=(.*)\n", head)
        if not m:
            continue
        L = launches[m.group(1)]
        body = head[m.end():]
        first = re.search(r"(?m)^  (in|out|inout) [^\n]*:", body)
        lines = body[:first.start()] if first else body
        module = re.search(r"(?m)^  module: (.*)$", lines)
        out.append(" ".join(["S", hexs(m.group(2)), hexs(m.group(3)), hexs(m.group(4)),
                             hexs(module.group(1) if module else ""), hexs(lines)]))
        out.append(f"A {len(L['order'])}")
        out += [f"{name} {L['args'][name][0]} {L['args'][name][1]}" for name in L["order"]]
    records = len(log.records)
    out.append(f"W {records} {len(call.encode())}")
    return "\n".join(tensors + out) + "\n"


def build(work: str) -> str:
    exe = os.path.join(work, "replay_records")
    subprocess.run(["c++", "-std=c++17", "-O2", "-DNDEBUG", "-I", os.path.join(ROOT, "cpp_runtime", "include"),
                    os.path.join(HERE, "replay_records.cpp"), "-o", exe, "-lpthread"], check=True)
    return exe


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("log")
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--callgrind", action="store_true")
    args = parser.parse_args()
    with open(args.log) as f:
        call = last_call(f.read())
    work = tempfile.mkdtemp(prefix="aoti-debug-records-")
    try:
        spec = os.path.join(work, "call.txt")
        with open(spec, "w") as f:
            f.write(describe(call))
        exe = build(work)
        env = {k: v for k, v in os.environ.items() if not k.startswith("AOTI_DEBUG_")}
        env["AOTI_DEBUG_LOGDEST"] = os.path.join(work, "log.txt")

        if args.callgrind:
            def instructions(mode, n):
                out = os.path.join(work, f"callgrind.{mode}.{n}")
                run = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", exe, spec,
                                      str(n), mode], env=env, capture_output=True, text=True, check=True)
                return int(re.search(r"Collected : (\d+)", run.stderr).group(1))
            per = {mode: (instructions(mode, 200) - instructions(mode, 100)) // 100 for mode in ("records", "stats")}
            print(f"instructions per call: records {per['records']:,}, statistics pass {per['stats']:,}, "
                  f"outside it {per['records'] - per['stats']:,}")
            return 0

        times = {"records": [], "stats": [], "writes": []}
        for _ in range(args.rounds):
            for mode in times:
                out = subprocess.run([exe, spec, str(args.calls), mode], env=env, capture_output=True, text=True,
                                     check=True)
                times[mode].append(float(out.stdout) / 1000)
        m = {mode: statistics.median(v) for mode, v in times.items()}
        floor = m["stats"] + m["writes"]
        print(f"per call, median of {args.rounds} rounds of {args.calls} calls: records {m['records']:.1f}us; "
              f"floor {floor:.1f}us (stats pass {m['stats']:.1f}us + write(2) {m['writes']:.1f}us); "
              f"records / floor {m['records'] / floor:.2f}x")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
