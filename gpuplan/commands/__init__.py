"""The `gpuplan` commands, one module per group; gpuplan/cli.py registers them."""
