"""What the analysis commands read: a log file, or a folder of logs and
level-10 dump folders, as one `records.Log`.

A folder whose logs hold no statistics is read from its dumps instead
(dumps.py, which imports torch); every file goes through untrusted.py.
"""

from __future__ import annotations

import glob
import os
from typing import List, Sequence, Tuple

from . import dumps
from .records import Log, LogInputError, merge, parse_file
from .untrusted import walk

LOG_SUFFIXES = (".log",)


def read(path: str) -> Log:
    """Read a log file, or the logs inside a dump directory, into one `Log`.

    Raises InputError (LogInputError when nothing usable is there; one line naming
    the file, and the line where it is one, and what was wrong).
    """
    if os.path.isdir(path):
        return _read_dir(path)
    if not os.path.exists(path):
        raise LogInputError(f"{path}: no such file or directory "
                            "(expected a log file written by aoti-debug, or a dump directory)")
    log = parse_file(path)
    if not log.records:
        raise LogInputError(f"{path}: holds no aoti-debug records "
                            "(expected a log written with AOTI_DEBUG_LOGLEVEL >= 1)")
    return log


def expand(patterns: Sequence[str]) -> List[str]:
    """Paths and globs (for a shell that left them unexpanded) as paths, each once, in order.

    Raises LogInputError for a glob that matches nothing."""
    out: List[str] = []
    for pattern in patterns:
        if glob.has_magic(pattern) and not os.path.exists(pattern):
            matches = sorted(glob.glob(pattern))
            if not matches:
                raise LogInputError(f"{pattern}: no such file or directory, and as a glob it matches "
                                    "none (expected logs or dump directories written by aoti-debug)")
        else:
            matches = [pattern]
        out += [m for m in matches if m not in out]
    return out


def _one_copy_each(folders) -> Tuple[List[str], List[str]]:
    """The run folders to read, each run once, and a note for each copy left out.  A run can be
    in its level-10 folder and in black box dumps (`<pid>-blackbox/`, `<pid>-blackbox.2/`, ...);
    read twice, its launches would pair with the wrong ends.  The level-10 copy (it has every
    output) is read, else the first dump's."""
    kept = {}
    notes = []
    for folder in sorted(folders, key=lambda f: (f.count(os.sep), f)):
        name = os.path.basename(folder)         # <pid>-<model>-run<R>: one process's one run
        if name in kept:
            notes.append(f"{folder}: a copy of {kept[name]}, which is read instead (left out)")
        else:
            kept[name] = folder
    return sorted(kept.values()), notes


def read_many(patterns: Sequence[str]) -> Log:
    """Several logs or dump directories of one job (paths or globs) as one `Log`, their
    records merged by time; one path is read as `read` reads it."""
    paths = expand(patterns)
    logs = [read(p) for p in paths]
    return logs[0] if len(logs) == 1 else merge(", ".join(paths), logs)


def _read_dir(path: str) -> Log:
    files = list(walk(path, depth=2))        # logs and dumps live in <dir>/ and <dir>/<pid>-<label>/
    logs = [f for f in files if f.endswith(LOG_SUFFIXES)]
    every = [parse_file(p) for p in logs]
    parsed = [log for log in every if log.records]
    # named, not passed over: a rank whose log was cut inside its first record
    empty = [f"{log.path}: holds no aoti-debug record (left out)" for log in every if not log.records]
    folders, copies = _one_copy_each({os.path.dirname(f) for f in files if os.path.basename(f) == "manifest.jsonl"})
    if folders and not any(log.level_hint() >= 5 for log in parsed):
        # the logs have no statistics (or there are none): the dumped tensors give them
        dumped = dumps.read(path, folders)
        if dumped.records:
            if parsed:
                dumped.left_out.append(f"{len(parsed)} *.log file(s) below level 5 left out: the dumped "
                                       f"tensors were read instead (first: {parsed[0].path})")
            dumped.left_out += copies + empty
            return dumped
    if not parsed:
        what = (f"{len(folders)} manifest.jsonl file(s) with no dumped launch or call" if folders
                else "no dump folder (manifest.jsonl)")
        raise LogInputError(f"{path}: the directory holds no *.log file with records and {what} "
                            "(expected *.log files written by aoti-debug, e.g. with "
                            "AOTI_DEBUG_LOGDEST=<dir>/debug_%i.log, or the dump directory of a "
                            "run at AOTI_DEBUG_LOGLEVEL=10)")
    merged = merge(path, parsed)
    merged.left_out += empty
    return merged
