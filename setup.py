"""The optional C extension fabricase._native (src/fabricase/_native.c); everything else is in pyproject.toml.

optional=True: where no C compiler or Python headers are present the build goes on without it, and fabricase
runs the same functions in Python (fabricase.native). With OpenSSL's headers (libssl-dev) it also hashes the
items it indexes (SHA256 from libcrypto); without them the Python code hashes."""

import os
import sysconfig

from setuptools import Extension, setup


def _openssl() -> bool:
    """OpenSSL's sha.h in one of the compiler's usual include folders (or $CPATH)."""
    folders = [sysconfig.get_paths()["include"], "/usr/include", "/usr/local/include",
               *os.environ.get("CPATH", "").split(os.pathsep)]
    return any(folder and os.path.exists(os.path.join(folder, "openssl", "sha.h")) for folder in folders)


_SSL = _openssl()
setup(ext_modules=[Extension("fabricase._native", ["src/fabricase/_native.c"], optional=True,
                             extra_compile_args=["-O2"], define_macros=[("FABRICASE_HAVE_OPENSSL", "1")] if _SSL
                             else [], libraries=["crypto"] if _SSL else [])])
