"""The ``orbitmq`` command: servers, the standalone main job, benchmarks."""
