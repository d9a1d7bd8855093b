"""The Python runtime: what `log_api` and torch.compile's instrumented wrapper
call at run time.  It writes the records of docs/log-format.md exactly as the
C++ runtime in the artifact does (format.py -> sink.py, flushed per record).
Importing the package imports nothing else."""
