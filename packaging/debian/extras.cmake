# CPack pre-build script (packaging/CMakeLists.txt): adds to the .deb's staging
# tree what only the package carries, and builds cpa-dbgsym.
#   /usr/bin/{cpa,cpa-view,cpa-push} -> /opt/cpa/bin/*   (cpa finds its stages and
#       cpa-view through /proc/self/exe, so the links work as PATH entries)
#   /usr/share/doc/cpa/copyright        from LICENSE (machine-readable format)
#   /usr/share/doc/cpa/changelog.gz     the package version (a native package)
#   /usr/share/man/man1/{cpa,cpa-view,cpa-push}.1.gz   from packaging/man/
#   /usr/share/lintian/overrides/cpa    debian/lintian-overrides
#   /opt/cpa/bin/* stripped as dh_strip does; their debug info, by build-id, in
#   <package dir>/cpa-dbgsym_<version>_<arch>.ddeb (/usr/lib/debug/.build-id/)
set(root "${CPACK_TEMPORARY_INSTALL_DIRECTORY}")
set(src "${CPACK_CPA_SOURCE_DIR}")

file(MAKE_DIRECTORY "${root}/usr/bin")
foreach(b cpa cpa-view cpa-push)
  file(CREATE_LINK /opt/cpa/bin/${b} "${root}/usr/bin/${b}" SYMBOLIC)
endforeach()

set(doc "${root}/usr/share/doc/cpa")
file(MAKE_DIRECTORY "${doc}")
file(READ "${src}/LICENSE" license)
string(REGEX MATCH "Copyright \\(c\\) ([^\n]*)" _ "${license}")
set(holder "${CMAKE_MATCH_1}")
# The license text, indented and with blank lines as " .", as DEP-5 wants.
string(REGEX REPLACE "^MIT License\n+Copyright[^\n]*\n+" "" text "${license}")
string(STRIP "${text}" text)
string(REPLACE "\n\n" "\n.\n" text "${text}")
string(REPLACE "\n" "\n " text "${text}")
file(WRITE "${doc}/copyright"
"Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: cpa

Files: *
Copyright: ${holder}
License: Expat
 ${text}
")

string(TIMESTAMP date "%a, %d %b %Y %H:%M:%S +0000" UTC)
file(WRITE "${doc}/changelog"
"cpa (${CPACK_PACKAGE_VERSION}) unstable; urgency=medium

  * Package built with cpack from the cpa source tree (docs/packaging.md).

 -- ${CPACK_DEBIAN_PACKAGE_MAINTAINER}  ${date}
")
execute_process(COMMAND gzip -9nf "${doc}/changelog" COMMAND_ERROR_IS_FATAL ANY)

set(man "${root}/usr/share/man/man1")
file(MAKE_DIRECTORY "${man}")
foreach(b cpa cpa-view cpa-push)
  configure_file("${src}/packaging/man/${b}.1" "${man}/${b}.1" COPYONLY)
  execute_process(COMMAND gzip -9nf "${man}/${b}.1" COMMAND_ERROR_IS_FATAL ANY)
  file(CHMOD "${man}/${b}.1.gz" PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
endforeach()

file(MAKE_DIRECTORY "${root}/usr/share/lintian/overrides")
configure_file("${src}/packaging/debian/lintian-overrides"
  "${root}/usr/share/lintian/overrides/cpa" COPYONLY)
file(CHMOD "${doc}/copyright" "${doc}/changelog.gz" "${root}/usr/share/lintian/overrides/cpa"
  PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)

# cpa-dbgsym: split the debug info out, strip, link the two by build-id and
# .gnu_debuglink.
find_program(OBJCOPY objcopy REQUIRED)
find_program(READELF readelf REQUIRED)
execute_process(COMMAND dpkg --print-architecture OUTPUT_VARIABLE arch
  OUTPUT_STRIP_TRAILING_WHITESPACE COMMAND_ERROR_IS_FATAL ANY)
set(dbg "${CPACK_TOPLEVEL_DIRECTORY}/cpa-dbgsym")
file(REMOVE_RECURSE "${dbg}")
file(GLOB bins "${root}/opt/cpa/bin/*")
set(ids "")
foreach(f IN LISTS bins)
  # ELF files only: bin/ also holds scripts (cpa-setcap)
  file(READ "${f}" magic LIMIT 4 HEX)
  if(NOT magic STREQUAL "7f454c46")
    continue()
  endif()
  execute_process(COMMAND ${READELF} -n "${f}" OUTPUT_VARIABLE notes COMMAND_ERROR_IS_FATAL ANY)
  if(NOT notes MATCHES "Build ID: ([0-9a-f][0-9a-f])([0-9a-f]+)")
    message(FATAL_ERROR "${f}: no build-id")
  endif()
  list(APPEND ids "${CMAKE_MATCH_1}${CMAKE_MATCH_2}")
  set(d "${dbg}/usr/lib/debug/.build-id/${CMAKE_MATCH_1}")
  set(out "${d}/${CMAKE_MATCH_2}.debug")
  file(MAKE_DIRECTORY "${d}")
  execute_process(COMMAND ${OBJCOPY} --only-keep-debug --compress-debug-sections "${f}" "${out}"
    COMMAND_ERROR_IS_FATAL ANY)
  execute_process(COMMAND ${OBJCOPY} --remove-section=.comment --remove-section=.note
    --strip-unneeded "${f}" COMMAND_ERROR_IS_FATAL ANY)
  execute_process(COMMAND ${OBJCOPY} --add-gnu-debuglink=${out} "${f}" COMMAND_ERROR_IS_FATAL ANY)
  file(CHMOD "${out}" PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
endforeach()
file(MAKE_DIRECTORY "${dbg}/usr/share/doc")
file(CREATE_LINK cpa "${dbg}/usr/share/doc/cpa-dbgsym" SYMBOLIC)
file(GLOB_RECURSE dfiles LIST_DIRECTORIES false RELATIVE "${dbg}" "${dbg}/usr/lib/*")
set(md5 "")
set(kb 0)
foreach(f IN LISTS dfiles)
  file(MD5 "${dbg}/${f}" sum)
  string(APPEND md5 "${sum}  ${f}\n")
  file(SIZE "${dbg}/${f}" sz)
  math(EXPR kb "${kb} + (${sz} + 1023) / 1024")
endforeach()
list(JOIN ids " " ids)
file(WRITE "${dbg}/DEBIAN/md5sums" "${md5}")
file(WRITE "${dbg}/DEBIAN/control"
"Package: cpa-dbgsym
Source: cpa
Version: ${CPACK_PACKAGE_VERSION}
Architecture: ${arch}
Maintainer: ${CPACK_DEBIAN_PACKAGE_MAINTAINER}
Installed-Size: ${kb}
Depends: cpa (= ${CPACK_PACKAGE_VERSION})
Section: debug
Priority: optional
Auto-Built-Package: debug-symbols
Package-Type: ddeb
Build-Ids: ${ids}
Description: debug symbols for cpa
")
file(CHMOD "${dbg}/DEBIAN/md5sums" "${dbg}/DEBIAN/control"
  PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
set(ddeb "${CPACK_PACKAGE_DIRECTORY}/cpa-dbgsym_${CPACK_PACKAGE_VERSION}_${arch}.ddeb")
execute_process(COMMAND dpkg-deb --root-owner-group -Zxz --build "${dbg}" "${ddeb}"
  OUTPUT_QUIET COMMAND_ERROR_IS_FATAL ANY)
message(STATUS "- package: ${ddeb} generated.")
