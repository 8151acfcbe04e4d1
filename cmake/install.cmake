# `cmake --install`: the headers, the layer libraries with a CMake package (VeloxQuantConfig)
# and pkg-config files (component dev), and the CLI (component cli). The Python package installs
# its own component (python/CMakeLists.txt).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
set(VELOXQUANT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/VeloxQuant)

set(exported ${VELOXQUANT_LIBRARIES} veloxquant)
if(VELOXQUANT_CUDA)
  list(APPEND exported veloxquant_cuda veloxquant_cuda_whole)
endif()
install(TARGETS ${exported} EXPORT VeloxQuantTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/veloxquant DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
install(EXPORT VeloxQuantTargets NAMESPACE VeloxQuant:: DESTINATION ${VELOXQUANT_CMAKE_DIR}
  COMPONENT dev)
configure_package_config_file(cmake/VeloxQuantConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/VeloxQuantConfig.cmake INSTALL_DESTINATION ${VELOXQUANT_CMAKE_DIR})
# Before 1.0 a minor version may change the API.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/VeloxQuantConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/VeloxQuantConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/VeloxQuantConfigVersion.cmake DESTINATION ${VELOXQUANT_CMAKE_DIR}
  COMPONENT dev)

# One pkg-config file per layer, each listing the layers below it (static libraries, in link
# order). The prefix is found from the file's own place, so the tree can move (the .deb, a DESTDIR).
file(RELATIVE_PATH PC_UP /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
set(pc_cuda "")
if(VELOXQUANT_CUDA)
  find_package(CUDAToolkit REQUIRED)
endif()
if(VELOXQUANT_CUDA)
  # The backend registers its device formats from objects nothing references: link it whole.
  get_filename_component(cuda_libdir "${CUDAToolkit_LIBRARY_DIR}" ABSOLUTE)
  set(pc_cuda "-Wl,--whole-archive -lveloxquant_cuda -Wl,--no-whole-archive -L${cuda_libdir} -lcublas -lcudart_static -ldl -lrt")
endif()
function(veloxquant_pkg_config name description)
  set(PC_NAME ${name})
  set(PC_DESCRIPTION ${description})
  set(PC_LIBS "")
  foreach(library IN LISTS ARGN)
    string(APPEND PC_LIBS " -l${library}")
  endforeach()
  string(STRIP "${PC_LIBS} ${pc_cuda}" PC_LIBS)
  configure_file(cmake/veloxquant.pc.in ${CMAKE_CURRENT_BINARY_DIR}/pkgconfig/${name}.pc @ONLY)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/pkgconfig/${name}.pc
    DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)
endfunction()
veloxquant_pkg_config(veloxquant-kv "VeloxQuant KV-cache codecs and compressed caches" veloxquant_kv)
veloxquant_pkg_config(veloxquant-runtime "VeloxQuant GGUF runtime over compressed caches"
  veloxquant_runtime veloxquant_kv)
veloxquant_pkg_config(veloxquant-serve "VeloxQuant's OpenAI-compatible server and its scheduler"
  veloxquant_serve veloxquant_runtime veloxquant_kv)
veloxquant_pkg_config(veloxquant "VeloxQuant: every layer" veloxquant_eval veloxquant_runtime
  veloxquant_kv)

install(TARGETS veloxquant_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT cli)
