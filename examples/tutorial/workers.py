"""A toy server: one worker process per input file, each loading the package.

    python workers.py PACKAGE INPUTS [INPUTS ...]

Each worker is a separate process (started with "spawn", as a server's
worker pool would be), loads the package itself and serves one request.  A
failed request is reported, not fatal.  With AOTI_DEBUG_LOGDEST=worker_%i.log
every process writes its own log, named by its process id.
"""

import multiprocessing
import os
import sys


def serve(rank, package, inputs, results):
    import torch

    model = torch._inductor.aoti_load_package(package)
    try:
        out = model(*torch.load(inputs))
        answer = f"NaN={int(out.isnan().sum())}"
    except RuntimeError as exc:
        answer = "failed: " + str(exc).splitlines()[0]
    results.put((rank, f"worker {rank} (pid {os.getpid()}) {inputs}: {answer}"))


if __name__ == "__main__":
    package, files = sys.argv[1], sys.argv[2:]
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    workers = [context.Process(target=serve, args=(rank, package, inputs, results))
               for rank, inputs in enumerate(files)]
    for w in workers:
        w.start()
    lines = sorted(results.get() for _ in workers)
    for w in workers:
        w.join()
    for _, line in lines:
        print(line)
