# dpu_control_kube: the Kubernetes ClusterSource (list+watch over HTTPS with
# cpprestsdk; the objects are decoded by dpu_control_cluster), kubeconfig and
# in-cluster configuration. The source's parts (src/kube_*.h, private): the
# transport, a reflector per kind, the dispatcher, the Node publisher. Included by dpu-agent/control/CMakeLists.txt.
# Layering: control plane only — never DPDK.
find_package(cpprestsdk REQUIRED)
find_package(OpenSSL REQUIRED)

add_library(dpu_control_kube STATIC
  ${CMAKE_CURRENT_LIST_DIR}/src/kube_config.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/kube_transport.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/kube_reflector.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/kube_dispatcher.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/kube_node_publisher.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/kube_source.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/kube_node_label.cpp
)
target_include_directories(dpu_control_kube PUBLIC ${CMAKE_CURRENT_LIST_DIR}/include)
target_link_libraries(dpu_control_kube
  PUBLIC dpu::common dpu::control_cluster
  PRIVATE cpprestsdk::cpprest OpenSSL::SSL OpenSSL::Crypto)
add_library(dpu::control_kube ALIAS dpu_control_kube)
