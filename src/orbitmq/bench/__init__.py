"""Benchmarks: ``python -m orbitmq.bench <subcommand> [options]``.

Each subcommand is a module of this package with ``add_arguments(parser)`` and
``run(args) -> int``; ``__main__`` keeps the table of them. Benchmarks print what they
measured, next to the target it is judged against, and clean up what they create.
"""
