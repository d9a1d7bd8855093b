"""`aoti-debug diff A B`: align two logs (or dump directories) of the same model and name the
first diverging launch."""

from __future__ import annotations

from ..cli import FOUND, OK, UsageError, check_tolerances, echo, undecided


def add_arguments(parser) -> None:
    parser.add_argument("paths", nargs="+", metavar="LOG",
                        help="A B: level-5 logs or level-10 dump directories of the reference run (e.g. "
                        "torch.compile) and of the run to check (e.g. the AOTI artifact); with --ranks, "
                        "the logs of one job (paths or globs)")
    parser.add_argument("--ranks", action="store_true",
                        help="compare the processes of one job, replicas that should agree (data "
                        "parallel), with the lowest rank, run by run; name the first launch where one differs")
    parser.add_argument("--run", type=int, default=None, metavar="R",
                        help="which run of the model to compare (default: 1; with --ranks, every run)")
    parser.add_argument("--atol", type=float, default=1e-5,
                        help="absolute tolerance on min/max/mean, or on every element when both sides "
                        "are dumps (default: 1e-5)")
    parser.add_argument("--rtol", type=float, default=1e-3,
                        help="relative tolerance, as --atol (default: 1e-3); counts must match exactly")
    parser.add_argument("--exact", action="store_true",
                        help="outputs must be equal bit for bit (their content hashes, level 5): for two "
                        "runs of one artifact, names the first non-deterministic launch")


def run(args) -> int:
    from ..analysis import diff, load
    from ..analysis.untrusted import InputError
    check_tolerances(args.atol, args.rtol)
    if args.ranks:
        return _ranks(args)
    if len(args.paths) != 2:
        raise UsageError(f"expected two logs, A and B, and got {len(args.paths)} "
                         "(or --ranks with the logs of one job)")
    log_a_path, log_b_path = args.paths
    try:
        log_a, log_b = load.read(log_a_path), load.read(log_b_path)
        result = diff.diff(log_a, log_b, run=args.run or 1, atol=args.atol, rtol=args.rtol,
                           exact=args.exact)
    except InputError as exc:
        raise UsageError(str(exc)) from None
    echo([f"A: {log_a_path}", f"B: {log_b_path}", *diff.table(result), *diff.summary(result)])
    if result.first_divergence is not None:
        return FOUND
    if result.unreadable:       # nothing differs where it could be read: no verdict
        raise undecided(result.unreadable, "whether A and B agree")
    return OK


def _ranks(args) -> int:
    from ..analysis import diff, load
    from ..analysis.untrusted import InputError
    try:
        replicas = diff.diff_replicas(load.read_many(args.paths), args.atol, args.rtol, args.run,
                                      args.exact)
    except InputError as exc:
        raise UsageError(str(exc)) from None
    echo(diff.replicas_text(replicas))
    if replicas.first is not None:
        return FOUND
    if replicas.unreadable:
        raise undecided(replicas.unreadable, "whether the ranks agree")
    return OK
