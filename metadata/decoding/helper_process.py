"""What a helper process (a renderer, a device worker) does first, so that its parent alone decides
when it ends: it dies with its parent, ignores SIGINT (a terminal sends it to the whole process group;
the parent stops its helpers itself), ends quietly on SIGTERM, and lets go of the parent's stdin and
stdout, so that a reader of the parent's output sees its end as soon as the parent is gone."""

from __future__ import annotations

import ctypes
import os
import signal

_PR_SET_PDEATHSIG = 1


def single_threaded() -> bool:
    """Whether this process runs no thread but the calling one, native threads (CUDA's, a BLAS pool's, a
    driver's) included, which `threading` does not see; False where /proc cannot tell. Only then may a
    helper be forked: another thread may hold a lock that the child would wait on for ever."""
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


def become_helper() -> None:
    """Make this process a helper of its parent (see the module's docstring)."""
    ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
