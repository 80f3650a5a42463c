"""The profiler: measures forward-step times on this machine's device and writes profile
files (`python -m profiler run`, `profiler.measure`; `profiler.cli` dispatches the
commands); `profiler.groundtruth` checks the
simulator against real decoding with a trained pair. Errors and flag parsing shared by
both live in `profiler.flags`. May import `simulator` (its catalogs and profile format);
`simulator` never imports the profiler."""
