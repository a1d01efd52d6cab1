"""Builds the rmem package with setuptools, for
``pip install --no-build-isolation ./python`` (offline, with Debian's
python3-setuptools and python3-wheel): the same C sources as ``make``,
on the Limited API (an abi3 wheel for CPython >= 3.11).

It links librmem.so.1 as any application does: from this tree's build
(../build, after ``make``) when it is there, else the installed one
(``pkg-config librmem``, after ``make install``).  RMEM_BUILD names
another build directory.
"""
import os
import shlex
import subprocess

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
TREE = os.path.dirname(HERE)
build = os.environ.get("RMEM_BUILD", os.path.join(TREE, "build"))
if not os.path.isabs(build):
    build = os.path.join(TREE, build)

include_dirs, library_dirs, runtime_dirs = [], [], []
if os.path.exists(os.path.join(build, "librmem.so.1")):
    include_dirs.append(os.path.join(TREE, "client-lib", "include"))
    library_dirs.append(build)
else:
    try:
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "librmem"], check=True,
                               capture_output=True, text=True).stdout
        for f in shlex.split(flags):
            if f.startswith("-I"):
                include_dirs.append(f[2:])
            elif f.startswith("-L"):
                library_dirs.append(f[2:])
    except (OSError, subprocess.CalledProcessError):
        pass  # the compiler's default paths, /usr/include and /usr/lib

setup(
    name="rmem",
    version="1.4.0",
    description="Python binding of librmem, the rmem remote-memory client",
    packages=["rmem"],
    python_requires=">=3.11",
    ext_modules=[Extension(
        "rmem._rmem",
        sources=["src/module.c", "src/client.c", "src/region.c", "src/registration.c"],
        include_dirs=include_dirs,
        library_dirs=library_dirs,
        libraries=["rmem"],
        define_macros=[("_GNU_SOURCE", None)],
        py_limited_api=True,
    )],
    options={"bdist_wheel": {"py_limited_api": "cp311"}},
)
