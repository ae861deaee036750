"""narbench's benchmark scripts, grouped by what they measure (README.md lists them); run each as a
module from the checkout's root, e.g. `python -m benchmarks.speed.bench`."""
