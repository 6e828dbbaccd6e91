// Package baseinfo tells, from a base image's layers and config alone (no
// container is run and no Docker engine is needed), where pip would install
// packages in it and what is installed there already: the Python version
// and interpreter, the installation scheme (prefix, site-packages, scripts,
// headers), the glibc release, the architecture, the conda prefix, and the
// installed distributions.
//
// The layers are read in order with OCI whiteouts applied, as an overlay
// mount would show them. Symlinks are resolved inside the image (absolute
// ones from the image's root, ".." never above it), never on the host.
// Only small parts of a few files are read (metadata headers, pyvenv.cfg,
// sysconfig's scheme names, libc.so.6's version string), within a byte
// budget, and the number of entries is bounded (see Limits).
//
// How the interpreter is found: the command of the image (Entrypoint, or
// Cmd without one) when its first word names python, else the first
// directory of the config's PATH (Docker's default PATH when none) with
// python3 or python3.X. Symlinks are followed to the real executable; the
// version comes from a python3.X name on the way. Its prefix is the first
// parent directory that has lib/python3.X. Then:
//
//   - a venv (pyvenv.cfg beside the executable's directory): the venv's
//     lib/python3.X/site-packages and bin, interpreter <venv>/bin/python3.X;
//   - a conda environment (the prefix has conda-meta): <prefix>/lib/
//     python3.X/site-packages and <prefix>/bin;
//   - Debian's and Ubuntu's python (sysconfig has the posix_local scheme):
//     /usr/local/lib/python3.X/dist-packages and /usr/local/bin, or
//     /usr/lib/python3/dist-packages and /usr/bin when the image sets
//     DEB_PYTHON_INSTALL_LAYOUT=deb;
//   - an upstream build (python:3.x images, Alpine): <prefix>/lib/
//     python3.X/site-packages and <prefix>/bin.
//
// A base whose scheme cannot be read this way (no sysconfig in the image,
// Fedora's rpm_prefix or any layout where purelib and platlib differ) is
// refused rather than guessed. Its image labels can say it instead; a label
// overrides what is detected:
//
//	io.gateway.python.interpreter    absolute path of the python3.X executable
//	                                 (scripts' shebangs use it)
//	io.gateway.python.version        "3.11"
//	io.gateway.python.site-packages  where packages go (purelib = platlib)
//	io.gateway.python.scripts        where console scripts go
//	io.gateway.python.prefix         the scheme's prefix (.data/data goes there)
//	io.gateway.glibc                 "2.36", or "none" for musl or no libc
//
// For example, in a Dockerfile:
//
//	LABEL io.gateway.python.interpreter=/opt/py/bin/python \
//	      io.gateway.python.version=3.11 \
//	      io.gateway.python.site-packages=/opt/py/lib/python3.11/site-packages \
//	      io.gateway.python.scripts=/opt/py/bin
package baseinfo
