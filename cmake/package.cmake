# `cmake --build BUILD --target package`: a .deb of the dev and cli components (headers, static
# libraries, CMake and pkg-config files, the CLI). Its dependencies are the Debian packages the
# CMake package finds (-dev) plus what dpkg-shlibdeps reads off the CLI. A package is for other
# machines: configure it with -DVELOXQUANT_NATIVE=OFF and -DVELOXQUANT_CUDA=OFF (the CUDA
# toolkit's libraries are no Debian package), as .ci/run does.
if(VELOXQUANT_CUDA OR VELOXQUANT_NATIVE)
  add_custom_target(package
    COMMAND ${CMAKE_COMMAND} -E echo "package: this build has VELOXQUANT_CUDA=${VELOXQUANT_CUDA} VELOXQUANT_NATIVE=${VELOXQUANT_NATIVE}; a .deb needs both OFF (configure a separate build folder with -DVELOXQUANT_CUDA=OFF -DVELOXQUANT_NATIVE=OFF)"
    COMMAND ${CMAKE_COMMAND} -E false VERBATIM)
  return()
endif()
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME veloxquant)
set(CPACK_PACKAGE_VENDOR VeloxQuant)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "KV-cache compression: codecs, compressed caches, a GGUF runtime and its CLI")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "VeloxQuant developers")
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING ALL_COMPONENTS_IN_ONE)
set(CPACK_COMPONENTS_ALL dev cli)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS
  "libcpp-httplib-dev, libeigen3-dev, libfmt-dev, libhwy-dev, libopenblas-dev, nlohmann-json3-dev, pkg-config")
include(CPack)
