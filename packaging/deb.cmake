# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# The Debian package (docs/packaging.md): `cpack -G DEB` in a build configured with
# -DCMAKE_INSTALL_PREFIX=/usr, as scripts/build-deb.sh does. What it holds is what the
# install rules install; the version is project()'s, the architecture dpkg's, and the
# dependencies are dpkg-shlibdeps' reading of what the programs and libraries link.
set(UROCE_PACKAGE_MAINTAINER "uroce maintainers <maintainers@users.noreply.a-seed-ac3784f2.example>"
    CACHE STRING "The Debian package's Maintainer field")

# The changelog and copyright files Debian policy wants in /usr/share/doc/uroce. The date
# follows SOURCE_DATE_EPOCH when set (scripts/build-deb.sh: the last commit's), so a
# rebuild of one commit gives the same file.
string(TIMESTAMP UROCE_PACKAGE_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC)
configure_file(${CMAKE_CURRENT_LIST_DIR}/changelog.in ${CMAKE_BINARY_DIR}/packaging/changelog @ONLY)
add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/packaging/changelog.gz
  COMMAND gzip -9nc ${CMAKE_BINARY_DIR}/packaging/changelog > ${CMAKE_BINARY_DIR}/packaging/changelog.gz
  DEPENDS ${CMAKE_BINARY_DIR}/packaging/changelog VERBATIM)
add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/packaging/uroce.1.gz
  COMMAND gzip -9nc ${CMAKE_CURRENT_LIST_DIR}/uroce.1 > ${CMAKE_BINARY_DIR}/packaging/uroce.1.gz
  DEPENDS ${CMAKE_CURRENT_LIST_DIR}/uroce.1 VERBATIM)
add_custom_target(uroce_packaging_files ALL DEPENDS ${CMAKE_BINARY_DIR}/packaging/changelog.gz
                                                    ${CMAKE_BINARY_DIR}/packaging/uroce.1.gz)
install(FILES ${CMAKE_CURRENT_LIST_DIR}/copyright ${CMAKE_BINARY_DIR}/packaging/changelog.gz
        DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(FILES ${CMAKE_BINARY_DIR}/packaging/uroce.1.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
# A tag lintian reports wrongly, with the reason (docs/packaging.md).
install(FILES ${CMAKE_CURRENT_LIST_DIR}/lintian-overrides DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/lintian/overrides
        RENAME uroce)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME uroce)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${UROCE_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${UROCE_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # uroce_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "user-space RoCEv2 RDMA device for testing verbs programs")
# The synopsis is CPACK_PACKAGE_DESCRIPTION_SUMMARY; lines of at most 80 characters.
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "uroce runs an RDMA device as an ordinary process: no kernel module, no RDMA
NIC. Its drop-in libibverbs and librdmacm let unmodified verbs and RDMA CM
programs (ibverbs-utils, rdmacm-utils, perftest, UCX, MPI) use it, over UDP on
loopback or a network. `uroce run -- CMD` starts a device and runs CMD with the
libraries: a whole CI job or test suite.
.
The libraries are installed in a private directory that the dynamic linker
does not search: no program loads them outside `uroce run` (or the
LD_LIBRARY_PATH `uroce env` prints).")
# Depends from the ELF files' NEEDED entries (dpkg-shlibdeps); librdmacm's libibverbs is the
# package's own, found in the private directory.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# `uroce cluster` runs ip(8) (docs/cluster.md); nothing else needs it.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "iproute2")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CMAKE_BINARY_DIR}/lib)
# No shlibs or symbols file and no ldconfig trigger: the libraries are not for linking.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS OFF)
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
include(CPack)
