"""`aoti-debug diff A B`: align two logs (or dump directories) of the same model and name the
first diverging launch."""

from __future__ import annotations

from ..cli import FOUND, OK, UsageError, check_tolerances, echo, undecided


def add_arguments(parser) -> None:
    parser.add_argument("log_a", metavar="A", help="level-5 log or level-10 dump directory of the "
                        "reference run (e.g. torch.compile)")
    parser.add_argument("log_b", metavar="B", help="level-5 log or level-10 dump directory of the run "
                        "to check (e.g. the AOTI artifact)")
    parser.add_argument("--run", type=int, default=1, metavar="R",
                        help="which run of the model to compare (default: 1)")
    parser.add_argument("--atol", type=float, default=1e-5,
                        help="absolute tolerance on min/max/mean, or on every element when both sides "
                        "are dumps (default: 1e-5)")
    parser.add_argument("--rtol", type=float, default=1e-3,
                        help="relative tolerance, as --atol (default: 1e-3); counts must match exactly")


def run(args) -> int:
    from ..analysis import diff, load
    from ..analysis.untrusted import InputError
    check_tolerances(args.atol, args.rtol)
    try:
        log_a, log_b = load.read(args.log_a), load.read(args.log_b)
        result = diff.diff(log_a, log_b, run=args.run, atol=args.atol, rtol=args.rtol)
    except InputError as exc:
        raise UsageError(str(exc)) from None
    echo([f"A: {args.log_a}", f"B: {args.log_b}", *diff.table(result), *diff.summary(result)])
    if result.first_divergence is not None:
        return FOUND
    if result.unreadable:       # nothing differs where it could be read: no verdict
        raise undecided(result.unreadable, "whether A and B agree")
    return OK
