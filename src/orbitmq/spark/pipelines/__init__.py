"""Reference pipelines built on the orbitmq data source (run each with python -m)."""
