"""What the runtime needs from a device's own runtime: waiting for a launch and
asking whether its stream is being captured into a CUDA graph.

The twin of DeviceHooks in cpp_runtime/include/aoti_debug/detail/format.h.
CUDA's come from torch.cuda; tests inject their own (``inject``), so every
branch that uses them also runs on a CPU.
"""

from __future__ import annotations

from typing import Optional


class Hooks:
    """A device's hooks; this base is a CPU run's: nothing to wait for."""

    def synchronize(self) -> Optional[str]:
        """Waits for the queued work: None when it ran clean, else the device's error."""
        return None

    def capturing(self) -> bool:
        return False


class Cuda(Hooks):
    def synchronize(self) -> Optional[str]:
        import torch
        try:
            torch.cuda.synchronize()
        except RuntimeError as exc:   # torch's text: "CUDA error: ..." then advice
            return str(exc)
        return None

    def capturing(self) -> bool:
        import torch
        return torch.cuda.is_current_stream_capturing()


_injected: Optional[Hooks] = None


def inject(hooks: Optional[Hooks]) -> None:
    """Tests: the hooks every later run uses (None: back to the real ones)."""
    global _injected
    _injected = hooks


def hooks() -> Optional[Hooks]:
    """The hooks of a run starting now; None when no device has work to wait for."""
    if _injected is not None:
        return _injected
    import sys
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return Cuda()
    return None


def one_line(text: Optional[str]) -> str:
    """A device's error as a record's one line (format.h one_line)."""
    line = (text or "").split("\n", 1)[0].rstrip(" \r\t")
    return line or "unknown error"
