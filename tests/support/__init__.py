"""Support for the tests and benchmarks: real worker processes, the inline reference run, chaos rounds."""
