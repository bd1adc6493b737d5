"""How the pipeline's functions are traced and instantiated: maps on the CPU alone
(:mod:`~object_input.tracing.maps`) and traces kept across builds in one process
(:mod:`~object_input.tracing.trace_cache`)."""
