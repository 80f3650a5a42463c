"""Step times from measured kernel tables (aiconfigurator-core), per engine."""
