"""`aoti-debug diff A B`: align two logs (or dump directories) of the same model and name the
first diverging launch."""

from __future__ import annotations

from . import reading
from ..cli import UsageError, check_tolerances, echo, undecided, verdict


def add_arguments(parser) -> None:
    parser.add_argument("paths", nargs="+", metavar="LOG",
                        help="A B: level-5 logs or level-10 dump directories of the reference run (e.g. "
                        "the eager reference aoti_debug.eager_log writes, or torch.compile) and of the run "
                        "to check (e.g. the AOTI artifact); with --ranks, "
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
    from ..analysis import completeness, diff, load
    check_tolerances(args.atol, args.rtol)
    if args.ranks:
        return _ranks(args)
    if len(args.paths) != 2:
        raise UsageError(f"expected two logs, A and B, and got {len(args.paths)} "
                         "(or --ranks with the logs of one job)")
    log_a_path, log_b_path = args.paths
    with reading():
        log_a, log_b = load.read(log_a_path), load.read(log_b_path)
        result = diff.diff(log_a, log_b, run=args.run or 1, atol=args.atol, rtol=args.rtol,
                           exact=args.exact)
    gaps_a, gaps_b = completeness.of_log(log_a), completeness.of_log(log_b)
    gaps = completeness.Gaps(gaps_a.items + gaps_b.items)
    said = [f"{side}: {line}" for side, g in (("A", gaps_a), ("B", gaps_b)) for line in g.lines()]
    echo([f"A: {log_a_path}", f"B: {log_b_path}", *said, *diff.table(result), *diff.summary(result)])
    row = result.first_divergence
    if row is None and result.unreadable and not gaps:   # nothing differs where it could be read
        raise undecided(result.unreadable, "whether A and B agree")
    return verdict(row is not None, gaps, row is not None and gaps_a.before(log_a, _written(row.a))
                   and gaps_b.before(log_b, _written(row.b)))


def _written(event):
    """The record that shows an event's outputs (None for a side without the event)."""
    return None if event is None else event.end or event.first


def _ranks(args) -> int:
    from ..analysis import completeness, diff, load
    with reading():
        log = load.read_many(args.paths)
        replicas = diff.diff_replicas(log, args.atol, args.rtol, args.run, args.exact)
    gaps = completeness.of_log(log)
    echo(gaps.lines() + diff.replicas_text(replicas))
    first = replicas.first
    if first is None and replicas.unreadable and not gaps:
        raise undecided(replicas.unreadable, "whether the ranks agree")
    rows = first.divergence[1] if first is not None else None
    return verdict(first is not None, gaps, rows is not None and gaps.before(log, _written(rows.a))
                   and gaps.before(log, _written(rows.b)))
