"""The suite's fork server (tests/forkserver.py): a forked child starts as a
fresh `python -c` would in its own environment, whatever the server's."""

from conftest import clean_env
from forkserver import ForkServer

# whether the start-up hook activated aoti-debug in this process, and for a compile
HOOKED = """
import torch
import sys
from aoti_debug import _startup
print(_startup._done, any(type(f).__name__ == "_EntryPoints" for f in sys.meta_path))
"""


def test_a_child_activates_aoti_debug_for_its_own_settings_not_the_servers():
    """A server started beside an aoti-debug variable that compiles nothing in
    (the ctypes launch pass's AOTI_DEBUG_LAUNCH_EXTENSION=0) once ran the start-up
    hook itself: its children inherited an activation with no settings and
    compiled AOTI packages without instrumentation."""
    server = ForkServer(clean_env(AOTI_DEBUG_LAUNCH_EXTENSION="0"))
    try:
        env = clean_env(AOTI_DEBUG_LAUNCH_EXTENSION="0", AOTI_DEBUG_LOGLEVEL="3")
        assert server.accepts(HOOKED, env)
        proc = server.run(HOOKED, env, None, 120)
        assert (proc.returncode, proc.stdout) == (0, "True True\n"), proc.stderr
        plain = server.run(HOOKED, clean_env(), None, 120)     # no variable: the hook never ran
        assert (plain.returncode, plain.stdout) == (0, "False False\n"), plain.stderr
    finally:
        server.close()
