# The Debian package: install rules for its files and CPack's DEB generator.
#   cmake --build build/release && (cd build/release && cpack -G DEB)
# makes build/release/stalkd_<version>_<arch>.deb. Included last by CMakeLists.txt, so
# every target (stalkd, and the stalk CLI) is known here.
set(STALKD_DEB_DIR ${PROJECT_SOURCE_DIR}/packaging/debian)
set(STALKD_DEB_BUILD ${PROJECT_BINARY_DIR}/packaging)

# The man pages and changelog are installed compressed, as Debian wants them: gzip -9n (no
# name or time stamp, so the package is reproducible).
set(STALKD_DEB_GZ_SOURCES stalkd.8 changelog)
if(TARGET stalk)
  list(APPEND STALKD_DEB_GZ_SOURCES stalk.1)
endif()
set(STALKD_DEB_GZ)
foreach(file ${STALKD_DEB_GZ_SOURCES})
  add_custom_command(
    OUTPUT ${STALKD_DEB_BUILD}/${file}.gz
    COMMAND ${CMAKE_COMMAND} -E make_directory ${STALKD_DEB_BUILD}
    COMMAND gzip -9n -c ${STALKD_DEB_DIR}/${file} > ${STALKD_DEB_BUILD}/${file}.gz
    DEPENDS ${STALKD_DEB_DIR}/${file}
    VERBATIM)
  list(APPEND STALKD_DEB_GZ ${STALKD_DEB_BUILD}/${file}.gz)
endforeach()
# The documentation the man pages and `stalkd -h` point to: README.md and docs/*.md in
# /usr/share/doc/stalkd, gzipped the same way (as Debian installs beanstalkd's).
file(GLOB STALKD_DEB_DOCS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/*.md)
list(SORT STALKD_DEB_DOCS)
list(PREPEND STALKD_DEB_DOCS ${PROJECT_SOURCE_DIR}/README.md)
set(STALKD_DEB_DOCS_GZ)
foreach(doc ${STALKD_DEB_DOCS})
  get_filename_component(name ${doc} NAME)
  add_custom_command(
    OUTPUT ${STALKD_DEB_BUILD}/doc/${name}.gz
    COMMAND ${CMAKE_COMMAND} -E make_directory ${STALKD_DEB_BUILD}/doc
    COMMAND gzip -9n -c ${doc} > ${STALKD_DEB_BUILD}/doc/${name}.gz
    DEPENDS ${doc}
    VERBATIM)
  list(APPEND STALKD_DEB_DOCS_GZ ${STALKD_DEB_BUILD}/doc/${name}.gz)
endforeach()
add_custom_target(stalkd_package_files ALL DEPENDS ${STALKD_DEB_GZ} ${STALKD_DEB_DOCS_GZ})

# Paths are the package's: binaries under the prefix (/usr), the units and the defaults
# file at their absolute Debian places (CPACK_SET_DESTDIR keeps those inside the package).
set(STALKD_DEB_PROGRAMS stalkd)
if(TARGET stalk)
  list(APPEND STALKD_DEB_PROGRAMS stalk)
  install(FILES ${STALKD_DEB_BUILD}/stalk.1.gz DESTINATION share/man/man1)
endif()
foreach(program ${STALKD_DEB_PROGRAMS})
  install(TARGETS ${program} RUNTIME DESTINATION bin)
  # A stripped install (cpack) also drops the compilers' .comment notes, as dh_strip does.
  install(CODE "if(CMAKE_INSTALL_DO_STRIP)
    execute_process(COMMAND \"${CMAKE_STRIP}\" --remove-section=.comment
                    \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/bin/${program}\")
  endif()")
endforeach()
install(FILES ${STALKD_DEB_BUILD}/stalkd.8.gz DESTINATION share/man/man8)
install(FILES ${STALKD_DEB_DIR}/copyright ${STALKD_DEB_BUILD}/changelog.gz ${STALKD_DEB_DOCS_GZ}
        DESTINATION share/doc/stalkd)
install(FILES ${STALKD_DEB_DIR}/stalkd.service ${STALKD_DEB_DIR}/stalkd.socket
        DESTINATION /lib/systemd/system)
install(FILES ${STALKD_DEB_DIR}/default DESTINATION /etc/default RENAME stalkd)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME stalkd)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGE_CONTACT "stalkd maintainers <maintainers@users.noreply.a-seed-806933e1.example>")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# adduser: the postinst makes the stalkd system user. libssl3: TLS (loaded with dlopen when a
# tls:// listener is configured, so dpkg-shlibdeps cannot see it).
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser, libssl3")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "work queue server compatible with beanstalkd")
# The synopsis is the summary; this is the extended description.
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "stalkd is a drop-in replacement for beanstalkd 1.13: the same text protocol
on port 11300, byte for byte, and the same command-line flags, so existing
clients keep working. Jobs can be kept in a write-ahead log across restarts
and crashes; every operation is O(log n) and each event-loop iteration does
bounded work.
.
This package runs it as a systemd service on 127.0.0.1:11300 (socket
activation), as the stalkd user, with its binlog in /var/lib/stalkd. It also
installs stalk, a command-line client for stalkd and beanstalkd: put, reserve,
peek, purge, tail, a live top view, and dump and load of every job.")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${STALKD_DEB_DIR}/conffiles ${STALKD_DEB_DIR}/postinst ${STALKD_DEB_DIR}/prerm
    ${STALKD_DEB_DIR}/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
