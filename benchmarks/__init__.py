"""Performance measurements of the course's code; `python -m benchmarks.run` writes benchmarks/results/."""
