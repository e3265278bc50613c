"""The compiled part of mpcnet: Z_2^128 loops as numpy ufuncs (mpcnet/_ring128.c) and the GF(2^64)
kernels of the AND proof (mpcnet/_gf64.c); the rest of the project's metadata is in pyproject.toml."""

import numpy
from setuptools import Extension, setup

setup(ext_modules=[Extension("mpcnet._ring128", ["mpcnet/_ring128.c"],
                             include_dirs=[numpy.get_include()],
                             extra_compile_args=["-O3"]),
                   Extension("mpcnet._gf64", ["mpcnet/_gf64.c"], depends=["mpcnet/_gf64_kernels.h"],
                             extra_compile_args=["-O3"])])
