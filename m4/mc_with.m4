# SPDX-License-Identifier: Apache-2.0
# MC_WITH_PKG(name, description, pkg-config modules, VARPREFIX)
# Adds --with-NAME=auto|yes|no.  auto: use the library when pkg-config finds it, otherwise turn
# the feature off with a notice; yes: error when missing; no: off.
# Defines HAVE_VARPREFIX, the automake conditional HAVE_VARPREFIX, VARPREFIX_CFLAGS/_LIBS and
# the shell variable mc_have_NAME (yes/no).
AC_DEFUN([MC_WITH_PKG], [
  AC_ARG_WITH([$1],
    [AS_HELP_STRING([--with-$1=auto|yes|no], [$2 (default: auto)])],
    [], [with_$1=auto])
  mc_have_$1=no
  AS_CASE(["$with_$1"],
    [no], [],
    [yes], [PKG_CHECK_MODULES([$4], [$3], [mc_have_$1=yes],
              [AC_MSG_ERROR([--with-$1=yes but $3 not found: install its -dev package])])],
    [auto], [PKG_CHECK_MODULES([$4], [$3], [mc_have_$1=yes],
              [AC_MSG_NOTICE([$3 not found: $2 disabled])])],
    [AC_MSG_ERROR([--with-$1 takes auto, yes or no])])
  AS_IF([test "x$mc_have_$1" = xyes], [AC_DEFINE([HAVE_$4], [1], [Define if $2 is available])])
  AM_CONDITIONAL([HAVE_$4], [test "x$mc_have_$1" = xyes])
])

# MC_WITH_CUDA: --with-cuda=auto|yes|no|DIR.  Looks for cuda_runtime.h and libcudart in DIR
# (default /usr/local/cuda).  Sets CUDA_CFLAGS, CUDA_LIBS, HAVE_CUDA.
AC_DEFUN([MC_WITH_CUDA], [
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda=auto|yes|no|DIR], [GPU memory support through the CUDA runtime (default: auto, DIR /usr/local/cuda)])],
    [], [with_cuda=auto])
  mc_have_cuda=no
  mc_cuda_dir=/usr/local/cuda
  AS_CASE(["$with_cuda"], [yes|auto|no], [], [mc_cuda_dir="$with_cuda"; with_cuda=yes])
  AS_IF([test "x$with_cuda" != xno], [
    mc_save_CPPFLAGS="$CPPFLAGS"; mc_save_LIBS="$LIBS"; mc_save_LDFLAGS="$LDFLAGS"
    CPPFLAGS="$CPPFLAGS -I$mc_cuda_dir/include"
    LDFLAGS="$LDFLAGS -L$mc_cuda_dir/lib64"
    AC_CHECK_HEADER([cuda_runtime_api.h],
      [AC_CHECK_LIB([cudart], [cudaPointerGetAttributes], [mc_have_cuda=yes])])
    CPPFLAGS="$mc_save_CPPFLAGS"; LIBS="$mc_save_LIBS"; LDFLAGS="$mc_save_LDFLAGS"
    AS_IF([test "x$mc_have_cuda" = xyes],
      [AC_SUBST([CUDA_CFLAGS], ["-I$mc_cuda_dir/include"])
       AC_SUBST([CUDA_LIBS], ["-L$mc_cuda_dir/lib64 -Wl,-rpath,$mc_cuda_dir/lib64 -lcudart"])
       AC_DEFINE([HAVE_CUDA], [1], [Define if the CUDA runtime is available])],
      [AS_IF([test "x$with_cuda" = xyes],
        [AC_MSG_ERROR([--with-cuda: CUDA runtime not found in $mc_cuda_dir])],
        [AC_MSG_NOTICE([CUDA runtime not found: GPU memory support disabled])])])
  ])
  AM_CONDITIONAL([HAVE_CUDA], [test "x$mc_have_cuda" = xyes])
])

# AX_PTHREAD_LITE: we only target Linux/glibc, where -pthread is all that is needed.
AC_DEFUN([AX_PTHREAD_LITE], [
  PTHREAD_CFLAGS="-pthread"
  PTHREAD_LIBS="-pthread"
  AC_SUBST([PTHREAD_CFLAGS])
  AC_SUBST([PTHREAD_LIBS])
])
