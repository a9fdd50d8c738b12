"""The optional C extension fabricase._native (src/fabricase/_native.c); everything else is in pyproject.toml.

optional=True: where no C compiler or Python headers are present the build goes on without it, and fabricase
runs the same functions in Python (fabricase.native)."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("fabricase._native", ["src/fabricase/_native.c"], optional=True,
                             extra_compile_args=["-O2"])])
