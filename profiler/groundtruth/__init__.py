"""Ground truth on this machine: the trained byte-level pair and real decoding with it.

- `corpus`: the standard library's sources, split into train and held-out, code and prose;
- `train_pair`: trains the draft/target pair (`python -m profiler train-pair`);
- `specdec`: speculative sampling in plain torch, per-sequence acceptance, cache rollback;
- `validate`: measured speedups against the simulator's (`python -m profiler validate`);
- `serve_bench`: a continuous-batching loop around the pair under Poisson load, measured
  against `simulator.serving.engine` (`python -m profiler serve-bench`);
- `staging`: the two commands' output files replace the previous run's together, or not at
  all.

May import `simulator`, the profiler's measuring modules and its errors and flag parsing
(`profiler.flags`); it runs the profiler's own `run` command in process (`run_profile`,
through `profiler.measure.run_main`) and never imports the dispatcher, `profiler.cli`.
"""
