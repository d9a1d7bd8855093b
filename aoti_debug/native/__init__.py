"""The C++ runtime's out-of-line core seen from Python: build.py compiles its
pieces into the cache (for AOTI artifacts and for this binding), core.py
binds it with ctypes (statistics, the log registry shared by every model in
the process).  Without a compiler everything here degrades to None, never
to an error in the user's model."""
